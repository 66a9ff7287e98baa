package prober

import (
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// On a seed where dependency-watchdog's prober still runs, a second prober would scale the
// same controllers. dependency-watchdog's prober elects its leader through a Lease
// (controller-runtime, id dwd-prober-leader-election, in its --leader-election-namespace,
// default garden, where gardenlet deploys it); while that Lease is live, depwatch's prober
// stands aside: it probes and scales nothing, and says so.

// Defaults of prober.standAsideForDependencyWatchdog: dependency-watchdog's.
const (
	// DefaultDWDLeaseNamespace is dependency-watchdog's --leader-election-namespace default
	// (gardenlet passes none and deploys it in garden).
	DefaultDWDLeaseNamespace = "garden"
	// DefaultDWDLeaseName is the id dependency-watchdog's prober elects through.
	DefaultDWDLeaseName = "dwd-prober-leader-election"
	// StandAsideGrace is added to a Lease's renewTime + leaseDurationSeconds before it counts
	// as no longer renewed: the holder's clock and ours may differ a little.
	StandAsideGrace = 5 * time.Second
)

// StandAside is prober.standAsideForDependencyWatchdog:
//
//	standAsideForDependencyWatchdog:
//	  enabled: true                          # false: probe whatever dependency-watchdog does
//	  namespace: garden                      # its --leader-election-namespace
//	  leaseName: dwd-prober-leader-election  # its prober's Lease
type StandAside struct {
	Enabled   *bool  `json:"enabled,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	LeaseName string `json:"leaseName,omitempty"`
}

// LeaseRef names a Lease.
type LeaseRef struct {
	Namespace, Name string
}

func (r LeaseRef) String() string { return r.Namespace + "/" + r.Name }

// StandAsideLease is the Lease the prober stands aside for, and whether it does at all.
// defaultNamespace is the namespace when the config names none ("": garden).
func (p *Config) StandAsideLease(defaultNamespace string) (LeaseRef, bool) {
	s := p.StandAsideForDependencyWatchdog
	if s == nil {
		s = &StandAside{}
	}
	ref := LeaseRef{Namespace: s.Namespace, Name: s.LeaseName}
	if ref.Namespace == "" {
		ref.Namespace = defaultNamespace
	}
	if ref.Namespace == "" {
		ref.Namespace = DefaultDWDLeaseNamespace
	}
	if ref.Name == "" {
		ref.Name = DefaultDWDLeaseName
	}
	return ref, s.Enabled == nil || *s.Enabled
}

// validateStandAside checks the Lease's namespace and name.
func (p *Config) validateStandAside(add func(string, ...any)) {
	s := p.StandAsideForDependencyWatchdog
	if s == nil {
		return
	}
	if s.Namespace != "" {
		if m := validation.IsDNS1123Label(s.Namespace); len(m) > 0 {
			add("prober.standAsideForDependencyWatchdog.namespace: %q: %s", s.Namespace, strings.Join(m, "; "))
		}
	}
	if s.LeaseName != "" {
		if m := validation.IsDNS1123Subdomain(s.LeaseName); len(m) > 0 {
			add("prober.standAsideForDependencyWatchdog.leaseName: %q: %s", s.LeaseName, strings.Join(m, "; "))
		}
	}
}

// StandAsideInput is everything the decision to stand aside depends on.
type StandAsideInput struct {
	Lease LeaseRef
	// Off: the setting is disabled, or the Lease is the coordinator's own (it elects through
	// it as dependency-watchdog's replacement): OffWhy says which.
	Off    bool
	OffWhy string
	// Synced: the Lease's cache has synced (Found and Object are known).
	Synced bool
	Object *coordinationv1.Lease // nil: no such Lease
	// Own is this coordinator's identity in its own leader election ("": none).
	Own string
	Now time.Time
}

// StandAsideVerdict is DecideStandAside's answer.
type StandAsideVerdict struct {
	Aside  bool
	Holder string
	// Why is a sentence for the log, the Event and the paused namespaces' reason.
	Why string
	// Until: when the Lease, not renewed, stops counting: look again then (zero: only on
	// the Lease's next change).
	Until time.Time
}

// DecideStandAside: the prober stands aside while dependency-watchdog's prober holds its
// Lease: a holder is set, it is not this coordinator, and renewTime + leaseDurationSeconds
// + StandAsideGrace is still ahead. A Lease that cannot be read yet counts as held: the
// prober does not act on what it cannot see.
func DecideStandAside(in StandAsideInput) StandAsideVerdict {
	switch {
	case in.Off:
		return StandAsideVerdict{Why: in.OffWhy}
	case !in.Synced:
		return StandAsideVerdict{Aside: true, Why: fmt.Sprintf("the Lease %s of dependency-watchdog's prober cannot be read yet (the coordinator needs get, list and watch on it)", in.Lease)}
	case in.Object == nil:
		return StandAsideVerdict{Why: fmt.Sprintf("no Lease %s: dependency-watchdog's prober does not run", in.Lease)}
	}
	l := in.Object
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	renewed := time.Time{}
	switch {
	case l.Spec.RenewTime != nil:
		renewed = l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		renewed = l.Spec.AcquireTime.Time
	}
	var dur time.Duration
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	until := renewed.Add(dur + StandAsideGrace)
	switch {
	case holder == "":
		return StandAsideVerdict{Why: fmt.Sprintf("the Lease %s has no holder: dependency-watchdog's prober released it", in.Lease)}
	case in.Own != "" && holder == in.Own:
		return StandAsideVerdict{Holder: holder, Why: fmt.Sprintf("the Lease %s is held by this coordinator itself", in.Lease)}
	case renewed.IsZero():
		return StandAsideVerdict{Holder: holder, Why: fmt.Sprintf("the Lease %s held by %s was never renewed", in.Lease, holder)}
	case !in.Now.Before(until):
		return StandAsideVerdict{Holder: holder, Why: fmt.Sprintf("the Lease %s held by %s has not been renewed since %s (it expired at %s)",
			in.Lease, holder, renewed.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))}
	}
	return StandAsideVerdict{Aside: true, Holder: holder, Until: until,
		Why: fmt.Sprintf("dependency-watchdog's prober (%s) holds the Lease %s, renewed at %s: two probers would scale the same controllers",
			holder, in.Lease, renewed.UTC().Format(time.RFC3339))}
}
