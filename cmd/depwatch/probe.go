package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/depwatch/depwatch/probe"
)

func runProbe(ctx context.Context, args []string) int {
	return probeMain(ctx, args, os.LookupEnv, os.Stdout, os.Stderr)
}

func probeMain(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("depwatch probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig of the cluster holding NAMESPACE (the seed); default: $KUBECONFIG, ~/.kube/config, then the in-cluster service account")
	fs.Usage = func() { probeUsage(stdout, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitBadConfig
	}
	if fs.NArg() > 0 {
		return refuse(stderr, "probe", fmt.Errorf("unexpected argument %q: depwatch probe is configured by environment variables (see --help)", fs.Arg(0)))
	}

	// Collect every problem before doing anything, so one run shows the whole list.
	log, logErr := newLogger(lookup)
	opts, optErr := probe.LoadOptions(lookup)
	if err := errors.Join(logErr, optErr); err != nil {
		return refuse(stderr, "probe", err)
	}
	log.SetOutput(stdout) // os.Stdout in production; the tests read it

	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		log.WithError(err).Error("Cannot reach the Kubernetes API server; nothing was scaled.")
		writeTerminationMessage(err.Error())
		return exitFailure
	}
	deps, err := probe.NewDeps(cfg)
	if err != nil {
		log.WithError(err).Error("Cannot build the Kubernetes clients; nothing was scaled.")
		writeTerminationMessage(err.Error())
		return exitFailure
	}

	summary, runErr := probe.Run(ctx, deps, opts, log)
	writeTerminationMessage(summary.String())
	if runErr != nil {
		return exitFailure
	}
	return exitOK
}

func probeUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "Usage: depwatch probe [--kubeconfig PATH]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "One probe run for one control-plane namespace (meltdown protection, dependency-watchdog's")
	fmt.Fprintln(w, "prober): read the kubeconfig Secret, probe the control plane's API server, count its expired")
	fmt.Fprintln(w, "node leases, and scale the dependents down (too many expired) or back up, level by level")
	fmt.Fprintln(w, "through their scale subresource, keeping the replicas in dependency-watchdog's annotations.")
	fmt.Fprintln(w, "An unreachable or throttled API server means no decision: nothing is scaled.")
	fmt.Fprintln(w, "Exit codes: 0 done (including no decision), 1 a scale failed or the Secret/kubeconfig is")
	fmt.Fprintln(w, "unusable, 2 invalid configuration (nothing done). The summary is the termination message.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Environment:")
	probe.Usage(w)
	for _, s := range loggingSettings {
		fmt.Fprintf(w, "  %-24s default %-10q %s\n", s[0], s[1], s[2])
	}
}
