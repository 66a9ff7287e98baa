package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"

	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// jobSetup is what the Job subcommands (reap, probe) share: they are configured by
// environment variables, take only --kubeconfig, report every configuration problem at once
// with exit code 2, and say what was not touched when the API server cannot be reached.
type jobSetup struct {
	name      string // subcommand
	kubeHelp  string // what --kubeconfig points at
	untouched string // "no pod was touched": said when the run cannot start
	// usage writes what --help says before the flags; env, the environment's settings, after
	// them under envTitle.
	usage    func(w io.Writer)
	envTitle string
	env      func(w io.Writer)
	// lenientLogging: an unknown LOG_LEVEL or LOG_FORMAT is a warning, not a refusal
	// (reap: pod-reaper runs with them).
	lenientLogging bool
	// load reads the subcommand's options through lookup (the caller keeps them).
	load func(lookup func(string) (string, bool)) error
}

// start parses flags and environment and finds the API server. When ok is false the
// command is over and code is its exit code.
func (s jobSetup) start(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (log *logrus.Logger, cfg *rest.Config, code int, ok bool) {
	fs := flag.NewFlagSet("depwatch "+s.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", s.kubeHelp)
	fs.Usage = func() {
		s.usage(stdout)
		fmt.Fprintln(stdout, "\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprintln(stdout, "\n"+s.envTitle)
		s.env(stdout)
		printLoggingSettings(stdout)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, exitOK, false
		}
		return nil, nil, exitBadConfig, false
	}
	if fs.NArg() > 0 {
		return nil, nil, refuse(stderr, s.name, fmt.Errorf("unexpected argument %q: depwatch %s is configured by environment variables (see --help)", fs.Arg(0), s.name)), false
	}

	// Collect every problem before doing anything, so one run shows the whole list.
	log, logWarnings, logErr := newLogger(lookup, s.lenientLogging)
	var flagErr error
	if *kubeconfig != "" && inPod(lookup) {
		flagErr = errKubeconfigInPod
	}
	if err := errors.Join(flagErr, logErr, s.load(lookup)); err != nil {
		return nil, nil, refuse(stderr, s.name, err), false
	}
	log.SetOutput(stdout)
	for _, w := range logWarnings {
		log.WithField("setting", w).Warnf("Accepted an odd setting: %s", w)
	}

	cfg, ignored, err := jobRestConfig(*kubeconfig, lookup)
	if err != nil {
		return nil, nil, s.cannotStart(log, "Cannot reach the Kubernetes API server", err), false
	}
	for _, name := range ignored {
		log.WithFields(logrus.Fields{"setting": name, "action": "ignored", "reason": "in a pod"}).
			Warnf("%s is set, and ignored: inside a pod depwatch %s talks only to the cluster it runs in, with its service account.", name, s.name)
	}
	return log, cfg, exitOK, true
}

// cannotStart logs why the run could not start, leaves it as the termination message and
// returns exit code 1.
func (s jobSetup) cannotStart(log logrus.FieldLogger, what string, err error) int {
	log.WithError(err).Errorf("%s; %s.", what, s.untouched)
	writeTerminationMessage(err.Error())
	return exitFailure
}

func probeMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	var opts probe.Options
	setup := jobSetup{
		name:      "probe",
		kubeHelp:  "path to a kubeconfig of the cluster holding NAMESPACE (the seed), outside a pod only; default: $KUBECONFIG, ~/.kube/config, then the in-cluster service account. Inside a pod the run uses its service account alone (KUBECONFIG ignored, --kubeconfig refused)",
		untouched: "nothing was scaled",
		usage:     probeUsage,
		envTitle:  "Environment:",
		env:       probe.Usage,
		load: func(lookup func(string) (string, bool)) (err error) {
			opts, err = probe.LoadOptions(lookup)
			return err
		},
	}
	log, cfg, code, ok := setup.start(args, lookup, stdout, stderr)
	if !ok {
		return code
	}
	deps, err := probe.NewDeps(opts.Client.Or(probe.DefaultClientLimit).Apply(cfg))
	if err != nil {
		return setup.cannotStart(log, "Cannot build the Kubernetes clients", err)
	}

	report, _, runErr := probe.RunAll(ctx, deps, opts, log)
	writeTerminationMessage(probe.EncodeReport(report))
	if runErr != nil {
		return exitFailure
	}
	return exitOK
}

func probeUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: depwatch probe [--kubeconfig PATH]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "One probe run for one control-plane namespace (NAMESPACE) or several (NAMESPACES, each on its")
	fmt.Fprintln(w, "own, concurrently; meltdown protection, dependency-watchdog's prober): read the kubeconfig")
	fmt.Fprintln(w, "Secret, probe the control plane's API server, count its expired node leases, and scale the")
	fmt.Fprintln(w, "dependents down (too many expired) or back up, level by level through their scale")
	fmt.Fprintln(w, "subresource, keeping the replicas in dependency-watchdog's annotations. An unreachable or")
	fmt.Fprintln(w, "throttled API server means no decision: nothing is scaled. Every log line names its namespace.")
	fmt.Fprintln(w, "Exit codes: 0 done (including no decision; with NAMESPACES also when some namespaces failed:")
	fmt.Fprintln(w, "see their error lines), 1 with NAMESPACE a scale failed or the Secret/kubeconfig is unusable,")
	fmt.Fprintln(w, "2 invalid configuration (nothing done). The termination message is the run's summary line, then")
	fmt.Fprintln(w, `its report: "report: " and the JSON {"v":2,"end":<unix>,"results":{...},"ops":{...},`)
	fmt.Fprintln(w, `"ns":{"<namespace>":["<last result>",<s ago>]}}, or "gz85:" and the Ascii85 of it gzipped.`)
}

func reapMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	var opts reaper.Options
	setup := jobSetup{
		name:      "reap",
		kubeHelp:  "path to a kubeconfig, outside a pod only; default: $KUBECONFIG, ~/.kube/config, then the in-cluster service account. Inside a pod the run uses its service account alone (KUBECONFIG ignored, --kubeconfig refused)",
		untouched: "no pod was touched",
		usage:     reapUsage,
		envTitle:  "Environment (pod-reaper compatible, plus depwatch's additions):",
		env:       reaper.Usage,
		// pod-reaper logs an unknown LOG_LEVEL / LOG_FORMAT and carries on.
		lenientLogging: true,
		load: func(lookup func(string) (string, bool)) (err error) {
			opts, err = reaper.LoadOptions(lookup)
			return err
		},
	}
	log, cfg, code, ok := setup.start(args, lookup, stdout, stderr)
	if !ok {
		return code
	}
	// Two clients, each with its rate limit: Events never delay a delete. Both count their
	// requests, so the last line says what the run cost the API server.
	var requests atomic.Int64
	clients, err := reaper.NewClients(countRequests(cfg, &requests), opts.Client, false)
	if err != nil {
		return setup.cannotStart(log, "Cannot build a Kubernetes client", err)
	}

	summary, runErr := reaper.RunWith(ctx, clients, opts, log)
	writeTerminationMessage(reaper.TerminationMessage(summary))
	// pod-reaper's last line, which log alerts may wait for.
	log.WithField("api_requests", requests.Load()).Info("pod reaper is exiting")
	if runErr != nil {
		log.WithError(runErr).Error("The reaper run did not complete its job.")
		return exitFailure
	}
	return exitOK
}

// refuse reports invalid configuration: plain text on stderr (and the termination message),
// every problem on its own line, and exit code 2. Nothing has been listed or acted on.
func refuse(stderr io.Writer, cmd string, err error) int {
	var b strings.Builder
	fmt.Fprintf(&b, "depwatch %s: invalid configuration, nothing was done:\n", cmd)
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			fmt.Fprintf(&b, "  - %s\n", line)
		}
	}
	fmt.Fprint(stderr, b.String())
	writeTerminationMessage(withoutValues(b.String()))
	return exitBadConfig
}

// withoutValues is a refusal as the termination message carries it: each problem names its
// variable, never its value (envconf.WithoutValue), and points at the log, which says why.
func withoutValues(refusal string) string {
	lines := strings.Split(strings.TrimRight(refusal, "\n"), "\n")
	for i, line := range lines {
		if rest, ok := strings.CutPrefix(line, "  - "); ok {
			// A config file's problem is named after its file (--config-file=PATH: field="value": ...).
			file, problem, named := strings.Cut(rest, ": ")
			if !named || !strings.HasPrefix(file, "--") || strings.Contains(file, `"`) {
				file, problem = "", rest
			} else {
				file += ": "
			}
			lines[i] = "  - " + file + envconf.WithoutValue(problem)
		}
	}
	return strings.Join(lines, "\n") + "\n(what is wrong with each value: the container's log)\n"
}

func reapUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: depwatch reap [--kubeconfig PATH]")
	fmt.Fprintln(w, "       depwatch             (no command: reap, when any variable below is set; pod-reaper's image contract)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "One reaper run: list pods, keep those every enabled rule matches, and delete or evict")
	fmt.Fprintln(w, "them. Cycles follow SCHEDULE and never overlap; the first runs at the schedule's first")
	fmt.Fprintln(w, "tick (as pod-reaper), or at start with REAP_AT_START, WATCH or START_WHEN_READY, and then")
	fmt.Fprintln(w, "always completes. The run ends when RUN_DURATION has elapsed or on SIGTERM, after the")
	fmt.Fprintln(w, "pod in hand, with a summary line (also the container's termination message).")
	fmt.Fprintln(w, "REAP_COOLDOWN bounds how often a workload that stays broken is restarted: per owner (the pod's")
	fmt.Fprintln(w, "controller, or a bare pod), at most 1 + floor(RUN_DURATION / REAP_COOLDOWN) rounds, each of its")
	fmt.Fprintln(w, "pods at most once per round; pods held back are logged once per owner and round (action")
	fmt.Fprintln(w, "deferred) and counted as deferred in the summary. Weeder Jobs set it to 1m by default.")
	fmt.Fprintln(w, "Exit codes: 0 done, 1 the run could not do its job, 2 invalid configuration (nothing done).")
	fmt.Fprintln(w, "Rights: pod-reaper's (pods list and delete, pods/eviction create with EVICT) are enough for")
	fmt.Fprintln(w, "everything pod-reaper does. Events need events create; without it the first refusal is")
	fmt.Fprintln(w, "logged once and no Event is tried again. WATCH needs pods watch, START_WHEN_READY and TARGETS")
	fmt.Fprintln(w, "need endpointslices list and watch.")
}
