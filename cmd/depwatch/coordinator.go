package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/jobs"
)

func runCoordinator(ctx context.Context, args []string) int {
	return coordinatorMain(ctx, args, os.LookupEnv, os.Stdout, os.Stderr)
}

// coordinatorConfig reads flags (and their variables), LOG_LEVEL/LOG_FORMAT and the config
// file, reporting every problem at once.
func coordinatorConfig(args []string, lookup func(string) (string, bool), stdout io.Writer) (coordinator.Options, *coordinator.Config, *logrus.Logger, error) {
	opts, flagErr := coordinator.ParseFlags(args, lookup, stdout)
	if errors.Is(flagErr, coordinator.ErrHelp) {
		return opts, nil, nil, flagErr
	}
	log, logErr := newLogger(lookup)
	var cfg *coordinator.Config
	var cfgErr error
	if opts.ConfigFile != "" {
		cfg, cfgErr = opts.LoadConfig()
	}
	if err := errors.Join(flagErr, logErr, cfgErr); err != nil {
		return opts, nil, nil, err
	}
	return opts, cfg, log, nil
}

func coordinatorMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, cfg, log, err := coordinatorConfig(args, lookup, stdout)
	if errors.Is(err, coordinator.ErrHelp) {
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "Logging (environment):")
		for _, s := range loggingSettings {
			fmt.Fprintf(stdout, "  %s\n      %s\n      default %q\n", s[0], s[2], s[1])
		}
		return exitOK
	}
	if err != nil {
		return refuse(stderr, "coordinator", err)
	}
	metrics := coordinator.NewMetrics(version)
	coordinator.RegisterClientMetrics(metrics) // before the first client: every request counts
	rc, err := restConfig(opts.Kubeconfig)
	if err != nil {
		log.WithError(err).Error("Cannot reach the Kubernetes API server.")
		return exitFailure
	}
	rc.QPS = float32(opts.KubeAPIQPS)
	rc.Burst = opts.KubeAPIBurst
	rc.UserAgent = "depwatch-coordinator/" + version
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		log.WithError(err).Error("Cannot build a Kubernetes client.")
		return exitFailure
	}
	erc := rest.CopyConfig(rc) // a client of its own: its own rate limiter
	erc.QPS = float32(opts.EventsQPS)
	erc.Burst = opts.EventsBurst
	events, err := kubernetes.NewForConfig(erc)
	if err != nil {
		log.WithError(err).Error("Cannot build a Kubernetes client.")
		return exitFailure
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		log.WithError(err).Error("Cannot build a Kubernetes client.")
		return exitFailure
	}
	tpl, err := coordinator.ResolveTemplate(ctx, client, cfg.JobTemplate, lookup)
	if errors.Is(err, coordinator.ErrImageRequired) {
		return refuse(stderr, "coordinator", err)
	}
	if err != nil {
		log.WithError(err).Error("Cannot tell which image the Jobs use.")
		return exitFailure
	}

	fields := logrus.Fields{
		"version":        version,
		"services":       cfg.Services(),
		"watchDuration":  cfg.Watch().String(),
		"jobNamespace":   tpl.Namespace,
		"jobImage":       tpl.Image,
		"leaderElection": opts.EnableLeaderElection,
		"configReload":   map[bool]string{true: "every " + opts.ConfigReloadInterval.String(), false: "off"}[opts.ConfigReloadInterval > 0],
		"endpoints":      map[bool]string{true: "v1/Endpoints", false: "discovery.k8s.io/v1/EndpointSlice"}[cfg.UseEndpoints],
	}
	if p := cfg.Prober; p != nil {
		fields["probeNamespaces"] = p.Selector().String()
		fields["probeInterval"] = p.Interval().String()
		fields["probeJobRunDuration"] = p.RunDuration().String()
	}
	log.WithFields(fields).Info("Starting the coordinator.")

	err = coordinator.Run(ctx, coordinator.Deps{
		Client:      client,
		EventClient: events,
		Dynamic:     dyn,
		Config:      cfg,
		Options:     opts,
		Log:         log,
		Metrics:     metrics,
		Template:    tpl,
		Resolve: func(ctx context.Context, t jobs.Template) (jobs.Template, error) {
			return coordinator.ResolveTemplate(ctx, client, t, lookup)
		},
	})
	if err != nil {
		log.WithError(err).Error("The coordinator stopped.")
		return exitFailure
	}
	return exitOK
}
