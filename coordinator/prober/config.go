package prober

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/internal/decode"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// Defaults of the prober section: dependency-watchdog's where it has one.
const (
	DefaultProbeInterval             = 10 * time.Second
	DefaultProbeInitialDelay         = 30 * time.Second
	DefaultProbeTimeout              = probe.DefaultProbeTimeout
	DefaultBackoffJitterFactor       = 0.2
	DefaultNodeLeaseFailureFraction  = probe.DefaultNodeLeaseFailureFraction
	DefaultLeaseExpiryBufferFraction = probe.DefaultLeaseExpiryBufferFraction
	DefaultSuccessfulJobsHistory     = 1
	DefaultFailedJobsHistory         = 3
	DefaultClusterDiscoveryInterval  = time.Minute
	// DefaultNamespacesPerProbeJob: a probe Job covers a shard of about this many namespaces.
	// A probe pod costs about the same for 50 namespaces or 125 (most of it the binary's
	// pages): the count of pods is the cost. 125 keeps a 250-namespace seed at 2 probe pods
	// (coordinator and probe pods within 115 MiB, docs/benchmarks.md) and a 1,000-namespace
	// one at 8, and a shard's report (about 2.5 KB compressed) well inside the kubelet's 4 KiB.
	DefaultNamespacesPerProbeJob = 125
	// MaxNamespacesPerProbeJob bounds a shard: its report, every namespace's last probe,
	// travels in a 4 KiB termination message, which 200 namespaces fill even compressed
	// (probe.EncodeReport: about 3.9 KB for random Gardener names, all healthy), and a shard
	// is only about this size (rendezvous hashing: at 1,000 namespaces in shards of 175, the
	// largest is up to about 200). Its namespaces travel in the Job's environment (about 10 KB),
	// and a Job that follows its membership probes up to this many at once.
	MaxNamespacesPerProbeJob = 175
	// DefaultProbeJobRunDuration: each shard's Job probes for this long, then the next one
	// takes over: 30 Jobs per shard per hour.
	DefaultProbeJobRunDuration = 2 * time.Minute
	// DefaultKCMNodeMonitorGraceDuration is kube-controller-manager's own default
	// --node-monitor-grace-period, as dependency-watchdog assumes it.
	DefaultKCMNodeMonitorGraceDuration = 40 * time.Second
	// DefaultProbeNamespaceSelector is Gardener's label of a shoot's control-plane namespace.
	DefaultProbeNamespaceSelector = "gardener.cloud/role=shoot"
)

// Config is the config's `prober:` section. Its first eight fields are
// dependency-watchdog's prober ConfigMap data, read as they are; the rest are depwatch's.
//
//	prober:
//	  kubeConfigSecretName: shoot-access-dependency-watchdog-probe  # required; Secret key "kubeconfig"
//	  probeInterval: 10s
//	  initialDelay: 30s              # before a namespace's first probe
//	  probeTimeout: 30s
//	  backoffJitterFactor: 0.2       # each interval is probeInterval x (1 ± this x random)
//	  kcmNodeMonitorGraceDuration: 40s   # a shoot's own nodeMonitorGracePeriod wins
//	  nodeLeaseFailureFraction: 0.6
//	  dependentResourceInfos: [...]  # required; dependency-watchdog's format
//
// Fields dependency-watchdog does not know (and would ignore) are ignored with a warning
// naming each by its path, unless the name is a near miss of one of depwatch's own fields:
// those stay strict, since a typo there must not silently fall back to a default.
//
//	leaseExpiryBufferFraction: 0.75
//	namespaceSelector: {matchLabels: {gardener.cloud/role: shoot}}
//	successfulJobsHistoryLimit: 1
//	failedJobsHistoryLimit: 3
//	namespacesPerProbeJob: 125     # a probe Job covers a shard of about this many namespaces (1-175)
//	probeJobRunDuration: 2m        # 0: one probe per Job; > 0: one Job probes every interval this long
//	clusterDiscoveryInterval: 1m   # how often to look for Gardener's Cluster resource kind
//	dryRun: false
//	standAsideForDependencyWatchdog: {enabled: true, namespace: garden, leaseName: dwd-prober-leader-election}
//	                               # probe nothing while dependency-watchdog's prober holds that Lease (standaside.go)
type Config struct {
	KubeConfigSecretName        string                         `json:"kubeConfigSecretName"`
	ProbeInterval               *metav1.Duration               `json:"probeInterval,omitempty"`
	InitialDelay                *metav1.Duration               `json:"initialDelay,omitempty"`
	ProbeTimeout                *metav1.Duration               `json:"probeTimeout,omitempty"`
	BackoffJitterFactor         *float64                       `json:"backoffJitterFactor,omitempty"`
	DependentResourceInfos      []*probe.DependentResourceInfo `json:"dependentResourceInfos,omitempty"`
	KCMNodeMonitorGraceDuration *metav1.Duration               `json:"kcmNodeMonitorGraceDuration,omitempty"`
	NodeLeaseFailureFraction    *float64                       `json:"nodeLeaseFailureFraction,omitempty"`

	LeaseExpiryBufferFraction  *float64              `json:"leaseExpiryBufferFraction,omitempty"`
	NamespaceSelector          *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	SuccessfulJobsHistoryLimit *int32                `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int32                `json:"failedJobsHistoryLimit,omitempty"`
	ProbeJobRunDuration        *metav1.Duration      `json:"probeJobRunDuration,omitempty"`
	NamespacesPerProbeJob      *int32                `json:"namespacesPerProbeJob,omitempty"`
	ClusterDiscoveryInterval   *metav1.Duration      `json:"clusterDiscoveryInterval,omitempty"`
	DryRun                     bool                  `json:"dryRun,omitempty"`

	StandAsideForDependencyWatchdog *StandAside `json:"standAsideForDependencyWatchdog,omitempty"`

	// Filled by validate.
	resources    []probe.DependentResource
	resourceJSON string
	selector     labels.Selector
	warnings     []string // fields ignored, by path
}

// Warnings name the fields that were ignored (dependency-watchdog would ignore them too).
func (p *Config) Warnings() []string { return p.warnings }

func durOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// Effective values, defaults applied.
func (p *Config) Interval() time.Duration { return durOr(p.ProbeInterval, DefaultProbeInterval) }
func (p *Config) Delay() time.Duration    { return durOr(p.InitialDelay, DefaultProbeInitialDelay) }
func (p *Config) Timeout() time.Duration  { return durOr(p.ProbeTimeout, DefaultProbeTimeout) }
func (p *Config) KCMGrace() time.Duration {
	return durOr(p.KCMNodeMonitorGraceDuration, DefaultKCMNodeMonitorGraceDuration)
}
func (p *Config) Jitter() float64 {
	return ptr.Deref(p.BackoffJitterFactor, DefaultBackoffJitterFactor)
}
func (p *Config) LeaseFailure() float64 {
	return ptr.Deref(p.NodeLeaseFailureFraction, DefaultNodeLeaseFailureFraction)
}
func (p *Config) ExpiryBuffer() float64 {
	return ptr.Deref(p.LeaseExpiryBufferFraction, DefaultLeaseExpiryBufferFraction)
}
func (p *Config) SuccessfulHistory() int {
	return int(ptr.Deref(p.SuccessfulJobsHistoryLimit, DefaultSuccessfulJobsHistory))
}
func (p *Config) FailedHistory() int {
	return int(ptr.Deref(p.FailedJobsHistoryLimit, DefaultFailedJobsHistory))
}

// RunDuration is probeJobRunDuration; unset: DefaultProbeJobRunDuration, or 0 (one probe per
// Job) when probeInterval is longer than that: a Job per shard per interval is then no churn.
func (p *Config) RunDuration() time.Duration {
	def := DefaultProbeJobRunDuration
	if p.Interval() > def {
		def = 0
	}
	return durOr(p.ProbeJobRunDuration, def)
}

// PerJob is namespacesPerProbeJob (default 125): the shard count is the probed namespaces
// divided by it, rounded up.
func (p *Config) PerJob() int {
	return int(ptr.Deref(p.NamespacesPerProbeJob, DefaultNamespacesPerProbeJob))
}
func (p *Config) DiscoveryInterval() time.Duration {
	return durOr(p.ClusterDiscoveryInterval, DefaultClusterDiscoveryInterval)
}

// Selector of the probed namespaces (default gardener.cloud/role=shoot).
func (p *Config) Selector() labels.Selector { return p.selector }

// Resources are the parsed dependentResourceInfos; ResourcesJSON their compact JSON (the
// probe Job's DEPENDENT_RESOURCES).
func (p *Config) Resources() []probe.DependentResource { return p.resources }
func (p *Config) ResourcesJSON() string                { return p.resourceJSON }

// ProbeSpec is a probe Job of this config for namespace, triggered at now: every setting the
// config gives a probe run. A shard's launch adds its namespaces, their settings and its
// membership; a Job launched by hand, or in a test, gets the same settings as the
// coordinator's.
func (p *Config) ProbeSpec(namespace string, now time.Time) jobs.ProbeSpec {
	return jobs.ProbeSpec{
		JobSettings: probe.JobSettings{
			Namespace: namespace, Jitter: p.Jitter(), KubeconfigSecretName: p.KubeConfigSecretName,
			ProbeTimeout: p.Timeout(), NodeMonitorGrace: p.KCMGrace(), NodeLeaseFailureFraction: p.LeaseFailure(),
			LeaseExpiryBufferFraction: p.ExpiryBuffer(), DependentResources: p.ResourcesJSON(), DryRun: p.DryRun,
			RunDuration: p.RunDuration(), Interval: p.Interval(),
		},
		ScaleChain: p.ScaleChain(), TriggerTime: now,
	}
}

// ScaleChain is the longest the scaling of one probe can take: per direction, the sum over
// the levels of the largest initialDelay + timeout in the level; the slower direction.
func (p *Config) ScaleChain() time.Duration {
	perLevel := [2]map[int]time.Duration{{}, {}} // down, up
	for _, r := range p.resources {
		for dir, si := range []probe.ScaleInfo{r.ScaleDown, r.ScaleUp} {
			perLevel[dir][si.Level] = max(perLevel[dir][si.Level], addSat(si.InitialDelay, si.Timeout))
		}
	}
	var chain [2]time.Duration
	for dir, levels := range perLevel {
		for _, d := range levels {
			chain[dir] = addSat(chain[dir], d)
		}
	}
	return max(chain[0], chain[1])
}

// addSat adds two non-negative durations, saturating instead of overflowing: a scale chain
// of huge timeouts must compare as huge, never wrap round to negative.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Parse parses the section and validates every field, each problem naming its path under
// "prober.". Known fields are decoded strictly (a wrong value is an error); an unknown field
// is a warning, or an error when it looks like a misspelt depwatch field (ctrl.Decode); under
// dependentResourceInfos, dependency-watchdog's alone, always a warning.
func Parse(raw json.RawMessage) (*Config, []error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var p Config
	warnings, errs, invalid := ctrl.Decode(field.NewPath("prober"), raw, &p, func(path string) bool {
		return strings.HasPrefix(path, "prober.dependentResourceInfos")
	})
	if len(invalid) > 0 {
		return nil, errs // validating a half-decoded section would report fields as missing
	}
	errs = append(errs, p.validate()...)
	if len(errs) > 0 {
		return nil, errs
	}
	p.warnings = warnings
	slices.Sort(p.warnings)
	return &p, nil
}

// validate checks every field, each problem naming its path, sorted; it fills the parsed
// resources and selector.
func (p *Config) validate() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	name := func(field, v string, check func(string) []string) {
		if m := check(v); v != "" && len(m) > 0 {
			add("prober.%s: %q: %s", field, v, strings.Join(m, "; "))
		}
	}
	if p.KubeConfigSecretName == "" {
		add("prober.kubeConfigSecretName: required: the Secret (key \"kubeconfig\") in each probed namespace that reaches its API server")
	}
	name("kubeConfigSecretName", p.KubeConfigSecretName, validation.IsDNS1123Subdomain)
	aside := ptr.Deref(p.StandAsideForDependencyWatchdog, StandAside{})
	name("standAsideForDependencyWatchdog.namespace", aside.Namespace, validation.IsDNS1123Label)
	name("standAsideForDependencyWatchdog.leaseName", aside.LeaseName, validation.IsDNS1123Subdomain)
	p.validateDurations(add)
	p.validateNumbers(add)
	p.selector, _ = labels.Parse(DefaultProbeNamespaceSelector)
	if p.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
		switch {
		case err != nil:
			add("prober.namespaceSelector: %v", err)
		case s.Empty():
			add("prober.namespaceSelector: empty: it would probe every namespace")
		default:
			p.selector = s
		}
	}
	p.validateResources(add, len(errs) == 0)
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// validateDurations bounds every duration by ctrl.MaxDuration: the probe Job's deadline and
// the jittered interval are computed from them and must not overflow.
func (p *Config) validateDurations(add func(string, ...any)) {
	bounded := func(field string, d *metav1.Duration) {
		if d != nil && d.Duration > ctrl.MaxDuration {
			add("prober.%s: %s: must be at most %s", field, d.Duration, ctrl.MaxDuration)
		}
	}
	positive := func(field string, d *metav1.Duration) {
		if d != nil && d.Duration <= 0 {
			add("prober.%s: %s: must be greater than 0", field, d.Duration)
		}
		bounded(field, d)
	}
	positive("probeInterval", p.ProbeInterval)
	positive("probeTimeout", p.ProbeTimeout)
	positive("clusterDiscoveryInterval", p.ClusterDiscoveryInterval)
	if p.InitialDelay != nil && p.InitialDelay.Duration < 0 {
		add("prober.initialDelay: %s: must not be negative", p.InitialDelay.Duration)
	}
	bounded("initialDelay", p.InitialDelay)
	positive("kcmNodeMonitorGraceDuration", p.KCMNodeMonitorGraceDuration)
	if d := p.KCMNodeMonitorGraceDuration; d != nil && d.Duration > 0 && d.Duration < probe.MinNodeMonitorGrace {
		add("prober.kcmNodeMonitorGraceDuration: %s: must be at least %s (kubelets renew their leases every 10s: a shorter grace counts healthy nodes as expired)",
			d.Duration, probe.MinNodeMonitorGrace)
	}
	if p.ProbeJobRunDuration != nil {
		switch d := p.ProbeJobRunDuration.Duration; {
		case d < 0:
			add("prober.probeJobRunDuration: %s: must not be negative (0: one probe per Job)", d)
		case d > 0 && d < p.Interval():
			add("prober.probeJobRunDuration: %s: must be 0 (one probe per Job) or at least probeInterval (%s)", d, p.Interval())
		default:
			bounded("probeJobRunDuration", p.ProbeJobRunDuration)
		}
	}
}

// validateNumbers checks the fractions and counts.
func (p *Config) validateNumbers(add func(string, ...any)) {
	if p.BackoffJitterFactor != nil && (*p.BackoffJitterFactor < 0 || *p.BackoffJitterFactor >= 1) {
		add("prober.backoffJitterFactor: %g: must be in [0,1)", *p.BackoffJitterFactor)
	}
	for field, f := range map[string]*float64{"nodeLeaseFailureFraction": p.NodeLeaseFailureFraction, "leaseExpiryBufferFraction": p.LeaseExpiryBufferFraction} {
		if f != nil && !(*f > 0 && *f <= 1) {
			add("prober.%s: %g: must be in (0,1]", field, *f)
		}
	}
	for field, n := range map[string]*int32{"successfulJobsHistoryLimit": p.SuccessfulJobsHistoryLimit, "failedJobsHistoryLimit": p.FailedJobsHistoryLimit} {
		if n != nil && *n < 0 {
			add("prober.%s: %d: must not be negative", field, *n)
		}
	}
	if n := p.NamespacesPerProbeJob; n != nil && (*n < 1 || *n > MaxNamespacesPerProbeJob) {
		add("prober.namespacesPerProbeJob: %d: must be between 1 and %d (a shard's report, every namespace's last probe, must fit a 4 KiB termination message)", *n, MaxNamespacesPerProbeJob)
	}
}

// validateResources resolves dependentResourceInfos as dependency-watchdog reads them.
// othersValid: every other field is valid, so the probe Job's length, which sums several of
// them, is checked too (one mistake reported once).
func (p *Config) validateResources(add func(string, ...any), othersValid bool) {
	res, errs := probe.ResolveDependentResources(field.NewPath("prober", "dependentResourceInfos"), p.DependentResourceInfos)
	for _, pr := range decode.Problems(errs) {
		add("%s", pr)
	}
	if len(errs) > 0 {
		return
	}
	// The Job gets the resources as parsed, every field explicit and the ignored ones gone:
	// the probe reads its environment strictly.
	p.resources, p.resourceJSON = res, probe.EncodeDependentResources(res)
	// The probe Job's activeDeadlineSeconds covers its run, three probe timeouts and the scale
	// chain; the sum must stay a sane, non-overflowing duration.
	if job := addSat(addSat(p.RunDuration(), 3*min(p.Timeout(), ctrl.MaxDuration)), p.ScaleChain()); othersValid && job > ctrl.MaxDuration {
		add("prober.dependentResourceInfos: the probe Job would run too long: probeJobRunDuration (%s) + 3 x probeTimeout (%s) + the slower direction's sum over the levels of initialDelay + timeout (%s) must be at most %s",
			p.RunDuration(), p.Timeout(), p.ScaleChain(), ctrl.MaxDuration)
	}
}
