package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/reaper"
)

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
