package coordinator

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/weeder"
	"github.com/depwatch/depwatch/jobs"
)

// Lines are err's message, a problem a line, without blank ones.
func Lines(err error) []string {
	var out []string
	for line := range strings.Lines(err.Error()) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// Summary is one paragraph, for people, of what a coordinator started with these options and
// this config would watch and launch; only what can be known without a cluster (the Jobs'
// image, when the config names none, is read from the coordinator's pod at start).
func (o Options) Summary(cfg *config.Config) string {
	var s []string
	add := func(format string, a ...any) { s = append(s, fmt.Sprintf(format, a...)) }

	services := cfg.Services()
	if !cfg.Weeds(false) {
		add("No weeder: the config lists no service, and workloads' %s annotations are not followed.", weeder.AnnotationDependsOn)
	} else {
		if len(services) > 0 {
			source := map[bool]string{false: "EndpointSlices", true: "v1 Endpoints"}[cfg.UseEndpoints]
			add("Weeder: watches the %s of %d service(s) (%s) in %s.", source, len(services), strings.Join(services, ", "), cfg.NamespacesText())
		}
		if cfg.DependsOn() && !cfg.UseEndpoints { // followed where workloads may be read
			add("Weeder: follows the %s annotation of Deployments, StatefulSets and DaemonSets in %s, and watches the EndpointSlices of the Services they name.", weeder.AnnotationDependsOn, cfg.NamespacesText())
		}
		if cfg.Excludes() {
			add("A Service with dependents in another namespace is not weeded: the coordinator names each one it finds in a warning and counts it in depwatch_coordinator_weeder_services_excluded.")
		}
		armable := services
		if len(armable) == 0 {
			armable = []string{""} // the annotations' services: armWeeder's default
		}
		armed, total := 0, len(armable)
		for _, svc := range armable {
			if cfg.Arm(svc) {
				armed++
			}
		}
		switch {
		case armed == total:
			add("When one loses its last ready endpoint it launches that service's weeder Job armed, which waits up to %s for the return;", cfg.MaxWait())
		case armed == 0:
			add("When one is Ready again it launches that service's weeder Job (armWeeder false);")
		default:
			add("When one loses its last ready endpoint it launches that service's weeder Job armed (%d of %d services; the others on their return), which waits up to %s;", armed, total, cfg.MaxWait())
		}
		often := "on every crash (reapCooldown 0s)"
		if cooldown := cfg.Cooldown(); cooldown > 0 {
			often = fmt.Sprintf("each controller's at most once per %s", cooldown)
		}
		add("from the return the Job restarts the service's crash-looping dependents for %s, %s.", cfg.Watch(), often)
	}

	if p := cfg.Prober; p == nil {
		add("No prober: no meltdown protection (no prober section).")
	} else {
		var deps []string
		for _, r := range p.Resources() {
			deps = append(deps, r.Ref.String())
		}
		runs := fmt.Sprintf("each probing every %s for %s", p.Interval(), p.RunDuration())
		if p.RunDuration() == 0 {
			runs = fmt.Sprintf("one Job a shard every %s", p.Interval())
		}
		add("Prober: probes the namespaces matching %s with the kubeconfig of their Secret %s, through probe Jobs of about %d namespaces each (%s), and scales %s down when at least %g%% of a shoot's node leases expired, and back up when they recover.",
			p.Selector(), p.KubeConfigSecretName, p.PerJob(), runs, strings.Join(deps, ", "), 100*p.LeaseFailure())
		if p.DryRun {
			add("dryRun: the probe Jobs only say what they would scale.")
		}
		add("%s", standAsideSummary(o, p))
	}

	tpl := cfg.JobTemplate
	where := "the coordinator's own namespace"
	if tpl.Namespace != "" {
		where = "namespace " + tpl.Namespace
	}
	accounts := []string{tpl.ServiceAccountFor(jobs.KindWeeder) + " (weeder)"}
	if cfg.Prober != nil {
		accounts = append(accounts, tpl.ServiceAccountFor(jobs.KindProbe)+" (probe)")
	}
	add("Jobs run in %s with %s, as %s.", where, cmp.Or(tpl.Image, "the coordinator's own image (read from its pod at start)"), strings.Join(accounts, " and "))

	if o.EnableLeaderElection {
		add("One replica at a time leads, through the Lease %s in %s.", LeaseName, cmp.Or(o.LeaderElectionNamespace, "the coordinator's own namespace"))
	} else {
		add("No leader election: run one replica.")
	}
	if o.ConfigReloadInterval > 0 {
		add("The config files are checked every %s: a valid change restarts the coordinator to apply it.", o.ConfigReloadInterval)
	}
	return strings.Join(s, " ")
}
