package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/depwatch/depwatch/reaper"
)

func runReap(ctx context.Context, args []string) int {
	return reapMain(ctx, args, os.LookupEnv, os.Stdout, os.Stderr)
}

func reapMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("depwatch reap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig; default: $KUBECONFIG, ~/.kube/config, then the in-cluster service account")
	fs.Usage = func() { reapUsage(stdout, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitBadConfig
	}
	if fs.NArg() > 0 {
		return refuse(stderr, "reap", fmt.Errorf("unexpected argument %q: depwatch reap is configured by environment variables (see --help)", fs.Arg(0)))
	}

	// Collect every problem before doing anything, so one run shows the whole list.
	log, logErr := newLogger(lookup)
	opts, optErr := reaper.LoadOptions(lookup)
	if err := errors.Join(logErr, optErr); err != nil {
		return refuse(stderr, "reap", err)
	}

	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		log.WithError(err).Error("Cannot reach the Kubernetes API server; no pod was touched.")
		writeTerminationMessage(err.Error())
		return exitFailure
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.WithError(err).Error("Cannot build a Kubernetes client; no pod was touched.")
		writeTerminationMessage(err.Error())
		return exitFailure
	}

	summary, runErr := reaper.Run(ctx, client, opts, log)
	writeTerminationMessage(summary.String())
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
	writeTerminationMessage(b.String())
	return exitBadConfig
}

func reapUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "Usage: depwatch reap [--kubeconfig PATH]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "One reaper run: list pods, keep those every enabled rule matches, and delete or evict")
	fmt.Fprintln(w, "them. The first cycle runs at start and always completes; later cycles follow SCHEDULE")
	fmt.Fprintln(w, "and never overlap. The run ends when RUN_DURATION has elapsed or on SIGTERM, after the")
	fmt.Fprintln(w, "pod in hand, with a summary line (also the container's termination message).")
	fmt.Fprintln(w, "Exit codes: 0 done, 1 the run could not do its job, 2 invalid configuration (nothing done).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Environment (pod-reaper compatible, plus depwatch's additions):")
	reaper.Usage(w)
	printLoggingSettings(w)
}
