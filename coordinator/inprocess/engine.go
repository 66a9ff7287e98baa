package inprocess

import (
	"context"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// exitCode is a run's exit code, as its container's would be: 1 when it failed.
func exitCode(err error) int32 {
	if err != nil {
		return 1
	}
	return 0
}

// engine runs job's run with the engine its container's arguments name
// (`reap`, `probe`), configured by the container's environment exactly as the pod would be:
// the engine's own LoadOptions reads it, so a run here and a Job's pod cannot differ in
// what they do (their client's rate limits aside: here, the process's).
func (e *Executor) engine(ctx context.Context, job *batchv1.Job, log logrus.FieldLogger) (int32, string) {
	cs := job.Spec.Template.Spec.Containers
	if len(cs) == 0 || len(cs[0].Args) == 0 {
		return jobs.ExitBadConfig, "the Job names no depwatch subcommand"
	}
	c := cs[0]
	env := map[string]string{}
	for _, v := range c.Env {
		if v.ValueFrom == nil { // a field or Secret reference is not the engine's setting
			env[v.Name] = v.Value
		}
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	switch c.Args[0] {
	case "reap":
		return e.reap(ctx, lookup, log)
	case "probe":
		return e.probe(ctx, lookup, log)
	}
	return jobs.ExitBadConfig, fmt.Sprintf("unknown depwatch subcommand %q", c.Args[0])
}

// refused is the termination message of a run whose settings are invalid, as the
// subcommands word it.
func refused(cmd string, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "depwatch %s: invalid configuration, nothing was done:\n", cmd)
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			fmt.Fprintf(&b, "  - %s\n", line)
		}
	}
	return b.String()
}

func (e *Executor) reap(ctx context.Context, lookup func(string) (string, bool), log logrus.FieldLogger) (int32, string) {
	opts, err := reaper.LoadOptions(lookup)
	if err != nil {
		log.WithError(err).Error("The weeder run's settings are invalid; no pod was touched.")
		return jobs.ExitBadConfig, refused("reap", err)
	}
	// The process's shared limiters, not the Job's own KUBE_API_* (see the package's doc).
	clients, err := reaper.ClientsFor(e.opts.Config, e.opts.EventsConfig, e.opts.NoEvents)
	if err != nil {
		log.WithError(err).Error("Cannot build the run's clients; no pod was touched.")
		return exitCode(err), err.Error()
	}
	summary, err := reaper.RunWith(ctx, clients, opts, log)
	if err != nil {
		log.WithError(err).Error("The reaper run did not complete its job.")
	}
	return exitCode(err), reaper.TerminationMessage(summary)
}

func (e *Executor) probe(ctx context.Context, lookup func(string) (string, bool), log logrus.FieldLogger) (int32, string) {
	opts, err := probe.LoadOptions(lookup)
	if err != nil {
		log.WithError(err).Error("The probe run's settings are invalid; nothing was scaled.")
		return jobs.ExitBadConfig, refused("probe", err)
	}
	// The process's shared limiter, not the Job's own KUBE_API_* (see the package's doc); the
	// shoots' own clients keep theirs: their requests go to other API servers.
	deps, err := probe.NewDepsWith(e.opts.Config, e.opts.Discovery)
	if err != nil {
		log.WithError(err).Error("Cannot build the run's clients; nothing was scaled.")
		return exitCode(err), err.Error()
	}
	deps.NoEvents = e.opts.NoEvents
	deps.FollowMembership = e.followMembership
	report, _, err := probe.RunAll(ctx, deps, opts, log)
	return exitCode(err), probe.EncodeReport(report)
}
