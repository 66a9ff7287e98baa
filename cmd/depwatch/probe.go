package main

import (
	"context"
	"fmt"
	"io"

	"github.com/depwatch/depwatch/probe"
)

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
