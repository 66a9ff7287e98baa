package probe

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options is a validated probe configuration. Build it with LoadOptions.
type Options struct {
	Namespace                 string
	KubeconfigSecretName      string
	ProbeTimeout              time.Duration
	NodeMonitorGrace          time.Duration // KCM_NODE_MONITOR_GRACE_DURATION
	NodeLeaseFailureFraction  float64
	LeaseExpiryBufferFraction float64
	Resources                 []DependentResource
	DryRun                    bool
	// NodeConditions: worker pool → the node conditions that take its nodes out of the lease
	// count (NODE_CONDITIONS; pools not listed use DefaultUnhealthyNodeConditions).
	NodeConditions map[string][]string

	ScheduleSpec string        // "" = a single probe
	Schedule     cron.Schedule // nil = a single probe
	RunDuration  time.Duration // > 0 exactly when Schedule is set
}

// ConfigError lists every configuration problem, one per line and nothing else (like the
// reaper's), so that depwatch prints one bullet per problem under its own heading. main exits
// with code 2 on it.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	return strings.Join(e.Problems, "\n")
}

// cronParser accepts five fields, an optional leading seconds field, and descriptors such as
// @every 10s (the same syntax as `depwatch reap`).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// LoadOptions reads every setting through lookup (os.LookupEnv in production). On bad input it
// returns a *ConfigError listing every problem at once, each as `NAME="value": problem`; it
// never panics.
func LoadOptions(lookup func(string) (string, bool)) (Options, error) {
	e := &env{lookup: lookup}
	var o Options

	if v, ok := e.get("NAMESPACE"); ok {
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			e.fail("NAMESPACE", v, "not a valid namespace name: %s", strings.Join(errs, "; "))
		}
		o.Namespace = v
	}
	if v, ok := e.get("KUBECONFIG_SECRET_NAME"); ok {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			e.fail("KUBECONFIG_SECRET_NAME", v, "not a valid Secret name: %s", strings.Join(errs, "; "))
		}
		o.KubeconfigSecretName = v
	}
	if v, ok := e.get("PROBE_TIMEOUT"); ok {
		o.ProbeTimeout, _ = e.positiveDuration("PROBE_TIMEOUT", v)
	}
	if v, ok := e.get("KCM_NODE_MONITOR_GRACE_DURATION"); ok {
		o.NodeMonitorGrace, _ = e.positiveDuration("KCM_NODE_MONITOR_GRACE_DURATION", v)
	}
	o.NodeLeaseFailureFraction, _ = e.fraction("NODE_LEASE_FAILURE_FRACTION")
	o.LeaseExpiryBufferFraction, _ = e.fraction("LEASE_EXPIRY_BUFFER_FRACTION")
	if v, ok := e.get("DEPENDENT_RESOURCES"); ok {
		res, problems := parseDependentResources([]byte(v), "DEPENDENT_RESOURCES")
		e.problems = append(e.problems, problems...)
		o.Resources = res
	}
	o.DryRun = e.boolean("DRY_RUN")
	if v, ok := e.optional("NODE_CONDITIONS"); ok {
		m, err := ParseNodeConditions(v)
		if err != nil {
			e.fail("NODE_CONDITIONS", v, "%v", err)
		}
		o.NodeConditions = m
	}

	spec, hasSchedule := e.optional("SCHEDULE")
	if hasSchedule {
		o.ScheduleSpec = spec
		o.Schedule = parseSchedule(e, spec)
	}
	if v, ok := e.optional("RUN_DURATION"); ok {
		d, valid := e.positiveDuration("RUN_DURATION", v)
		switch {
		case valid && !hasSchedule:
			e.fail("RUN_DURATION", v, "only valid with SCHEDULE (without SCHEDULE the Job probes once)")
		case valid:
			o.RunDuration = d
		}
	} else if hasSchedule {
		e.problems = append(e.problems, "RUN_DURATION: required with SCHEDULE (how long the Job keeps probing), not set")
	}

	if len(e.problems) > 0 {
		return Options{}, &ConfigError{Problems: e.problems}
	}
	return o, nil
}

// parseSchedule parses SCHEDULE. robfig/cron v3.0.1 panics on some inputs (a time-zone prefix
// without a space, e.g. "TZ=UTC"), so a panic becomes a configuration problem: bad input must
// never crash the process. A schedule that never fires (30 February) is rejected too.
func parseSchedule(e *env, spec string) (s cron.Schedule) {
	defer func() {
		if r := recover(); r != nil {
			e.fail("SCHEDULE", spec, "not a valid cron schedule")
			s = nil
		}
	}()
	s, err := cronParser.Parse(strings.TrimSpace(spec))
	if err != nil {
		e.fail("SCHEDULE", spec, "not a valid cron schedule: %v", err)
		return nil
	}
	if s.Next(time.Now()).IsZero() {
		e.fail("SCHEDULE", spec, "never fires")
		return nil
	}
	return s
}

// validate guards Run against an Options that did not come from LoadOptions.
func (o Options) validate() error {
	var problems []string
	if o.Namespace == "" {
		problems = append(problems, "no namespace")
	}
	if o.KubeconfigSecretName == "" {
		problems = append(problems, "no kubeconfig Secret name")
	}
	if o.ProbeTimeout <= 0 {
		problems = append(problems, "probe timeout must be > 0")
	}
	if o.NodeMonitorGrace <= 0 {
		problems = append(problems, "node monitor grace duration must be > 0")
	}
	if !(o.NodeLeaseFailureFraction > 0 && o.NodeLeaseFailureFraction <= 1) {
		problems = append(problems, "node lease failure fraction must be in (0,1]")
	}
	if !(o.LeaseExpiryBufferFraction > 0 && o.LeaseExpiryBufferFraction <= 1) {
		problems = append(problems, "lease expiry buffer fraction must be in (0,1]")
	}
	if len(o.Resources) == 0 {
		problems = append(problems, "no dependent resources")
	}
	if (o.Schedule == nil) != (o.RunDuration <= 0) {
		problems = append(problems, "a schedule needs a run duration > 0 and vice versa")
	}
	if len(problems) > 0 {
		return fmt.Errorf("probe options: %w", &ConfigError{Problems: problems})
	}
	return nil
}
