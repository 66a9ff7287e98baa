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
	return runCoordinatorWith(ctx, opts, cfg, log, lookup, stderr)
}

// runCoordinatorWith runs the coordinator (or, by opts.Role, one of its halves) on valid
// options and config until ctx ends.
func runCoordinatorWith(ctx context.Context, opts coordinator.Options, cfg *coordinator.Config, log *logrus.Logger, lookup func(string) (string, bool), stderr io.Writer) int {
	metrics := coordinator.NewMetrics(version)
	coordinator.RegisterClientMetrics(metrics) // before the first client: every request counts
	clients, err := coordinatorClients(opts)
	if err != nil {
		log.WithError(err).Error("Cannot reach the Kubernetes API server.")
		return exitFailure
	}
	tpl, err := coordinator.ResolveTemplate(ctx, clients.kube, cfg.JobTemplate, lookup)
	if errors.Is(err, coordinator.ErrImageRequired) {
		return refuse(stderr, opts.Role.Command(), err)
	}
	if err != nil {
		log.WithError(err).Error("Cannot tell which image the Jobs use.")
		return exitFailure
	}
	log.WithFields(startFields(opts, cfg, tpl)).Infof("Starting the %s.", map[coordinator.Role]string{
		coordinator.RoleCoordinator: "coordinator", coordinator.RoleWeeder: "weeder (dependency-watchdog's weeder command)",
		coordinator.RoleProber: "prober (dependency-watchdog's prober command)"}[opts.Role])
	err = coordinator.Run(ctx, coordinator.Deps{
		Client:      clients.kube,
		EventClient: clients.events,
		Dynamic:     clients.dynamic,
		Config:      cfg,
		Options:     opts,
		Log:         log,
		Metrics:     metrics,
		Template:    tpl,
		Resolve: func(ctx context.Context, t jobs.Template) (jobs.Template, error) {
			return coordinator.ResolveTemplate(ctx, clients.kube, t, lookup)
		},
	})
	if err != nil {
		log.WithError(err).Error("The coordinator stopped.")
		return exitFailure
	}
	return exitOK
}

// apiClients are the coordinator's clients of the API server.
type apiClients struct {
	kube    kubernetes.Interface
	events  kubernetes.Interface // a client of its own: its own rate limiter
	dynamic dynamic.Interface
}

func coordinatorClients(opts coordinator.Options) (apiClients, error) {
	rc, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return apiClients{}, err
	}
	rc.QPS = float32(opts.KubeAPIQPS)
	rc.Burst = opts.KubeAPIBurst
	rc.UserAgent = "depwatch-coordinator/" + version
	erc := rest.CopyConfig(rc)
	erc.QPS = float32(opts.EventsQPS)
	erc.Burst = opts.EventsBurst
	var c apiClients
	var errs [3]error
	c.kube, errs[0] = kubernetes.NewForConfig(rc)
	c.events, errs[1] = kubernetes.NewForConfig(erc)
	c.dynamic, errs[2] = dynamic.NewForConfig(rc)
	if err := errors.Join(errs[:]...); err != nil {
		return apiClients{}, fmt.Errorf("building a Kubernetes client: %w", err)
	}
	return c, nil
}

// startFields are the start log line's: what this coordinator runs with.
func startFields(opts coordinator.Options, cfg *coordinator.Config, tpl jobs.Template) logrus.Fields {
	fields := logrus.Fields{
		"version":        version,
		"services":       cfg.Services(),
		"watchDuration":  cfg.Watch().String(),
		"jobNamespace":   tpl.Namespace,
		"jobImage":       tpl.Image,
		"leaderElection": opts.EnableLeaderElection,
		"lease":          opts.Lease(),
		"configReload":   map[bool]string{true: "every " + opts.ConfigReloadInterval.String(), false: "off"}[opts.ConfigReloadInterval > 0],
		"endpoints":      map[bool]string{true: "v1/Endpoints", false: "discovery.k8s.io/v1/EndpointSlice"}[cfg.UseEndpoints],
	}
	if p := cfg.Prober; p != nil {
		fields["probeNamespaces"] = p.Selector().String()
		fields["probeInterval"] = p.Interval().String()
		fields["probeJobRunDuration"] = p.RunDuration().String()
	}
	return fields
}
