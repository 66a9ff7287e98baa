package main

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/roles"
)

func weederMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	return dwdMain(ctx, roles.Weeder, args, lookup, stdout, stderr)
}

func proberMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	return dwdMain(ctx, roles.Prober, args, lookup, stdout, stderr)
}

// dwdConfig reads dependency-watchdog's command line for role, LOG_LEVEL/LOG_FORMAT
// (--zap-log-level overriding the level) and the config file, reporting every problem at
// once.
func dwdConfig(role roles.Role, args []string, lookup func(string) (string, bool), stdout io.Writer) (coordinator.Options, coordinator.DWDSettings, *config.Config, *logrus.Logger, error) {
	opts, dwd, flagErr := coordinator.ParseDWDFlags(role, args, lookup, stdout)
	if errors.Is(flagErr, coordinator.ErrHelp) {
		return opts, dwd, nil, nil, flagErr
	}
	cfg, log, err := loggerAndConfig(opts, flagErr, lookup)
	if err != nil {
		return opts, dwd, nil, nil, err
	}
	log.SetOutput(stdout)
	if dwd.LogLevel != nil {
		log.SetLevel(*dwd.LogLevel)
	}
	return opts, dwd, cfg, log, nil
}

// dwdMain runs dependency-watchdog's command role: one half of the coordinator's work, with
// dependency-watchdog's flags, Lease and config file.
func dwdMain(ctx context.Context, role roles.Role, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, dwd, cfg, log, err := dwdConfig(role, args, lookup, stdout)
	if errors.Is(err, coordinator.ErrHelp) {
		printLoggingSettings(stdout)
		return exitOK
	}
	if err != nil {
		return refuse(stderr, role.Command(), err)
	}
	if len(dwd.NoEffect) > 0 {
		log.WithFields(logrus.Fields{"flags": dwd.NoEffect, "action": "ignored", "reason": "no effect in depwatch"}).
			Warnf("dependency-watchdog flags accepted that have no effect in depwatch: %s.", strings.Join(dwd.NoEffect, "; "))
	}
	return runCoordinatorWith(ctx, opts, cfg, log, lookup, stderr)
}
