package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/inprocess"
	"github.com/depwatch/depwatch/coordinator/metrics"
	"github.com/depwatch/depwatch/coordinator/rights"
	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/jobs"
)

// coordinatorConfig reads flags (and their variables), LOG_LEVEL/LOG_FORMAT and the config
// file, reporting every problem at once.
func coordinatorConfig(args []string, lookup func(string) (string, bool), stdout io.Writer) (coordinator.Options, *config.Config, *logrus.Logger, error) {
	opts, flagErr := coordinator.ParseFlags(args, lookup, stdout)
	if errors.Is(flagErr, coordinator.ErrHelp) {
		return opts, nil, nil, flagErr
	}
	cfg, log, err := loggerAndConfig(opts, flagErr, lookup)
	return opts, cfg, log, err
}

// loggerAndConfig reads LOG_LEVEL/LOG_FORMAT and opts' config file (if it names one), and
// reports their problems with flagErr's, all at once.
func loggerAndConfig(opts coordinator.Options, flagErr error, lookup func(string) (string, bool)) (*config.Config, *logrus.Logger, error) {
	log, _, logErr := newLogger(lookup, false)
	var cfg *config.Config
	var cfgErr error
	if opts.ConfigFile != "" {
		cfg, cfgErr = opts.LoadConfig()
	}
	if err := errors.Join(flagErr, logErr, cfgErr); err != nil {
		return nil, nil, err
	}
	return cfg, log, nil
}

func coordinatorMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	if checkRequested(args) && !slices.ContainsFunc(args, isHelpFlag) {
		return checkConfigMain(args, lookup, stdout, stderr)
	}
	opts, cfg, log, err := coordinatorConfig(args, lookup, stdout)
	if errors.Is(err, coordinator.ErrHelp) {
		printLoggingSettings(stdout)
		return exitOK
	}
	if err != nil {
		return refuse(stderr, "coordinator", err)
	}
	return runCoordinatorWith(ctx, opts, cfg, log, lookup, stderr)
}

func weederMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	return dwdMain(ctx, roles.Weeder, args, lookup, stdout, stderr)
}

func proberMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	return dwdMain(ctx, roles.Prober, args, lookup, stdout, stderr)
}

// dwdMain runs dependency-watchdog's command role: one half of the coordinator's work, with
// dependency-watchdog's flags, Lease and config file.
func dwdMain(ctx context.Context, role roles.Role, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, dwd, flagErr := coordinator.ParseDWDFlags(role, args, lookup, stdout)
	if errors.Is(flagErr, coordinator.ErrHelp) {
		printLoggingSettings(stdout)
		return exitOK
	}
	cfg, log, err := loggerAndConfig(opts, flagErr, lookup)
	if err != nil {
		return refuse(stderr, role.Command(), err)
	}
	log.SetOutput(stdout)
	if dwd.LogLevel != nil { // --zap-log-level overrides LOG_LEVEL
		log.SetLevel(*dwd.LogLevel)
	}
	if len(dwd.NoEffect) > 0 {
		log.WithFields(logrus.Fields{"flags": dwd.NoEffect, "action": "ignored", "reason": "no effect in depwatch"}).
			Warnf("dependency-watchdog flags accepted that have no effect in depwatch: %s.", strings.Join(dwd.NoEffect, "; "))
	}
	return runCoordinatorWith(ctx, opts, cfg, log, lookup, stderr)
}

// runCoordinatorWith runs the coordinator (or, by opts.Role, one of its halves) on valid
// options and config until ctx ends. What carries the runs out, Jobs or this process, is
// decided here, before anything runs, and said in the first log lines and in
// depwatch_coordinator_executor.
func runCoordinatorWith(ctx context.Context, opts coordinator.Options, cfg *config.Config, log *logrus.Logger, lookup func(string) (string, bool), stderr io.Writer) int {
	m := metrics.New(version)
	metrics.RegisterClient(m) // before the first client: every request counts
	clients, err := coordinatorClients(opts)
	if err != nil {
		log.WithError(err).Error("Cannot reach the Kubernetes API server.")
		return exitFailure
	}
	// The Jobs' template, completed once, where the runs are Jobs.
	resolve := sync.OnceValues(func() (jobs.Template, error) {
		return roles.ResolveTemplate(ctx, clients.kube, opts.Role, cfg.JobTemplate, lookup)
	})
	if opts.Role == roles.Coordinator && opts.Executor == rights.ExecutorChoiceJob {
		// Jobs whatever the rights say: their image is a config problem, said first.
		if _, err := resolve(); err != nil {
			return templateProblem(err, opts, log, stderr)
		}
	}
	jobNS := roles.RunNamespace(opts.Role, cfg.JobTemplate, lookup)
	granted := rights.Check(ctx, clients.kube, jobNS)
	if granted.Unreachable() {
		log.WithField("errors", granted.Unknown).Error("Cannot reach the Kubernetes API server: no SelfSubjectAccessReview could be made.")
		return exitFailure
	}
	kind, why := rights.ChooseExecutor(opts.Role, opts.Executor, granted.CreateJobs, jobNS)
	var tpl jobs.Template
	if kind == jobs.ExecutorJob {
		tpl, err = resolve()
		switch {
		case err != nil && opts.Role != roles.Coordinator:
			// dependency-watchdog's Deployment names no image for Jobs: run in-process.
			kind, why = jobs.ExecutorInProcess, why+"; but the Jobs' image is not known ("+err.Error()+"), so in-process"
		case err != nil:
			return templateProblem(err, opts, log, stderr)
		}
	}
	var exec jobs.Executor = jobs.InCluster(clients.kube)
	if kind == jobs.ExecutorInProcess {
		tpl = roles.InProcessTemplate(opts.Role, cfg.JobTemplate, lookup)
		exec = inprocess.New(inprocess.Options{Config: clients.rest, EventsConfig: clients.eventsRest,
			Discovery: memory.NewMemCacheClient(clients.kube.Discovery()), NoEvents: !granted.Events, Log: log})
	}
	if len(cfg.Services()) > 0 && !granted.Slices && granted.Endpoints && !opts.UseEndpoints {
		// dependency-watchdog's weeder before EndpointSlices: gardenlet granted Endpoints.
		opts.UseEndpointsInstead(cfg)
	}
	if opts.JobEgressPolicy && kind != jobs.ExecutorJob {
		log.WithFields(logrus.Fields{"flag": "--job-egress-policy", "action": "ignored", "reason": "no Jobs"}).
			Info("The runs are in-process, so there are no Jobs whose egress to keep: --job-egress-policy is ignored.")
		opts.JobEgressPolicy = false
	}
	m.SetExecutor(kind)
	fields := startFields(opts, cfg, tpl)
	fields["executor"], fields["executorReason"] = string(kind), why
	log.WithFields(fields).Infof("Starting the %s.", map[roles.Role]string{
		roles.Coordinator: "coordinator", roles.Weeder: "weeder (dependency-watchdog's weeder command)",
		roles.Prober: "prober (dependency-watchdog's prober command)"}[opts.Role])
	sayExecutor(log, kind, why, tpl.Namespace)
	sayRights(log, granted, kind, cfg, opts)
	err = coordinator.Run(ctx, coordinator.Deps{
		Shared:      ctrl.Shared{Client: clients.kube, Log: log, Template: tpl, Executor: exec},
		EventClient: clients.events,
		LeaseClient: clients.leases,
		Dynamic:     clients.dynamic,
		Config:      cfg,
		Options:     opts,
		Metrics:     m,
		Rights:      &granted,
	})
	if err != nil {
		log.WithError(err).Error("The coordinator stopped.")
		return exitFailure
	}
	return exitOK
}

// templateProblem reports a Job template the coordinator cannot complete.
func templateProblem(err error, opts coordinator.Options, log logrus.FieldLogger, stderr io.Writer) int {
	if errors.Is(err, roles.ErrImageRequired) {
		return refuse(stderr, opts.Role.Command(), err)
	}
	log.WithError(err).Error("Cannot tell which image the Jobs use.")
	return exitFailure
}

// sayExecutor is the first thing the log says after the start line: where the runs go.
func sayExecutor(log logrus.FieldLogger, kind jobs.ExecutorKind, why, namespace string) {
	l := log.WithFields(logrus.Fields{"executor": string(kind), "reason": why})
	if kind == jobs.ExecutorInProcess {
		l.Infof("Runs are carried out in this process (%s): each weeder or probe run is the same engine a Job's pod would run, its log lines here with the name of the Job it would have been (field job, namespace %s); they end with this process.", why, namespace)
		return
	}
	l.Infof("Runs are carried out as Jobs in namespace %s (%s).", namespace, why)
}

// sayRights says, once, what this service account may not do and what depwatch does
// instead, so that nothing is found out by a request the API server refuses.
func sayRights(log logrus.FieldLogger, r rights.Rights, kind jobs.ExecutorKind, cfg *config.Config, opts coordinator.Options) {
	weeder, inProcess := len(cfg.Services()) > 0, kind == jobs.ExecutorInProcess
	for _, n := range []struct {
		when   bool
		level  logrus.Level
		fields logrus.Fields
		msg    string
	}{
		{len(r.Unknown) > 0, logrus.WarnLevel, logrus.Fields{"reviews": r.Unknown},
			"Some SelfSubjectAccessReviews could not be made: what they asked about counts as not allowed."},
		{!r.Events, logrus.InfoLevel, logrus.Fields{"action": "log only", "reason": "may not create Events in every namespace"},
			"Events are written only in the Lease's namespace: this service account may not create them elsewhere. Every decision they would record is in the log."},
		{weeder && !r.Namespaces, logrus.InfoLevel, logrus.Fields{"action": "not read", "reason": "may not list or watch namespaces"},
			"Namespaces are not read: a service whose namespace is being deleted keeps its armed weeder until it returns or maxWait ends."},
		{weeder && !r.Services, logrus.InfoLevel, logrus.Fields{"action": "not read", "reason": "may not get Services"},
			"Services are not read: a lone outage is armed without asking whether its Service is being deleted."},
		{weeder && opts.UseEndpoints && !r.Slices, logrus.InfoLevel, logrus.Fields{"action": "watch Endpoints", "reason": "may not list or watch EndpointSlices"},
			"Watching v1 Endpoints: this service account may read Endpoints but not EndpointSlices (dependency-watchdog's RBAC before EndpointSlices)."},
		{!r.ScaleTargets, logrus.InfoLevel, logrus.Fields{"action": "not written", "reason": "may not create and update ConfigMaps in the Jobs' namespace"},
			"The probe admission policy's parameters (ConfigMap " + jobs.ScaleTargetsName + ") are not written: where that policy is installed, it does not check which dependents a probe scales."},
		{inProcess && weeder && !r.DeletePods, logrus.WarnLevel, logrus.Fields{"reason": "may not delete pods"},
			"The weeder runs in this process, but this service account may not delete pods: they cannot restart crash-looping dependents. Grant it the weeder's rights."},
		{inProcess && cfg.Prober != nil && (!r.ScaleWorkloads || !r.ReadSecrets), logrus.WarnLevel, logrus.Fields{"reason": "may not scale Deployments or read Secrets"},
			"The probe runs in this process, but this service account may not read the kubeconfig Secrets or scale Deployments: they cannot protect the control planes. Grant it the probe's rights."},
	} {
		if n.when {
			log.WithFields(n.fields).Log(n.level, n.msg)
		}
	}
}

// apiClients are the coordinator's clients of the API server.
type apiClients struct {
	// rest is what kube and dynamic were built from: the process's one budget of API
	// requests, --kube-api-qps and --kube-api-burst, as one rate limiter that every client
	// built from it shares, the in-process runs' included (apilimit.Limit.Shared).
	rest *rest.Config
	// eventsRest is the same for Events: their own budget (--kube-api-events-qps and
	// --kube-api-events-burst), shared by the coordinator's and the in-process runs' Events,
	// so that an Event never delays a request of the controller or a run.
	eventsRest *rest.Config
	kube       kubernetes.Interface
	events     kubernetes.Interface
	dynamic    dynamic.Interface
	// leases campaigns for and renews the Lease, with client-go's default limit of its own
	// (coordinator.Deps.LeaseClient): a request every retry period, outside the budget so
	// that a storm cannot cost the leadership.
	leases kubernetes.Interface
}

func coordinatorClients(opts coordinator.Options) (apiClients, error) {
	base, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return apiClients{}, err
	}
	base.UserAgent = "depwatch-coordinator/" + version
	c := apiClients{
		rest:       apilimit.Limit{QPS: opts.KubeAPIQPS, Burst: opts.KubeAPIBurst}.Shared(base),
		eventsRest: apilimit.Limit{QPS: opts.EventsQPS, Burst: opts.EventsBurst}.Shared(base),
	}
	var errs [4]error
	c.kube, errs[0] = kubernetes.NewForConfig(c.rest)
	c.events, errs[1] = kubernetes.NewForConfig(c.eventsRest)
	c.dynamic, errs[2] = dynamic.NewForConfig(c.rest)
	c.leases, errs[3] = kubernetes.NewForConfig(base)
	if err := errors.Join(errs[:]...); err != nil {
		return apiClients{}, fmt.Errorf("building a Kubernetes client: %w", err)
	}
	return c, nil
}

// startFields are the start log line's: what this coordinator runs with.
func startFields(opts coordinator.Options, cfg *config.Config, tpl jobs.Template) logrus.Fields {
	fields := logrus.Fields{
		"version":        version,
		"services":       cfg.Services(),
		"watchDuration":  cfg.Watch().String(),
		"jobNamespace":   tpl.Namespace,
		"jobImage":       tpl.Image,
		"leaderElection": opts.EnableLeaderElection,
		"lease":          opts.Lease(),
		"configCheck":    map[bool]string{true: "every " + opts.ConfigReloadInterval.String(), false: "off"}[opts.ConfigReloadInterval > 0],
		"endpoints":      map[bool]string{true: "v1/Endpoints", false: "discovery.k8s.io/v1/EndpointSlice"}[cfg.UseEndpoints],
		// when a service whose entry names no readyWhen counts as back (config.DefaultReadyWhen)
		"readyWhen": cfg.ReadyWhenDefault.String(),
	}
	if p := cfg.Prober; p != nil {
		fields["probeNamespaces"] = p.Selector().String()
		fields["probeInterval"] = p.Interval().String()
		fields["probeJobRunDuration"] = p.RunDuration().String()
	}
	return fields
}
