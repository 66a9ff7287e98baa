package main

import (
	"context"
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
	var opts probe.Options
	setup := jobSetup{
		name:      "probe",
		kubeHelp:  "path to a kubeconfig of the cluster holding NAMESPACE (the seed); default: $KUBECONFIG, ~/.kube/config, then the in-cluster service account",
		untouched: "nothing was scaled",
		usage:     probeUsage,
		load: func(lookup func(string) (string, bool)) (err error) {
			opts, err = probe.LoadOptions(lookup)
			return err
		},
	}
	log, cfg, code, ok := setup.start(args, lookup, stdout, stderr)
	if !ok {
		return code
	}
	deps, err := probe.NewDeps(cfg)
	if err != nil {
		return setup.cannotStart(log, "Cannot build the Kubernetes clients", err)
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
	printLoggingSettings(w)
}
