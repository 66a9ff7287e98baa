package prober

import (
	"cmp"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	s := ptr.Deref(p.StandAsideForDependencyWatchdog, StandAside{})
	return LeaseRef{Namespace: cmp.Or(s.Namespace, defaultNamespace, DefaultDWDLeaseNamespace), Name: cmp.Or(s.LeaseName, DefaultDWDLeaseName)},
		ptr.Deref(s.Enabled, true)
}

// StandAsideInput is everything the decision to stand aside depends on.
type StandAsideInput struct {
	Lease LeaseRef
	// OffWhy: why it never stands aside ("": it may): the setting is disabled, or the Lease
	// is the coordinator's own (it elects through it as dependency-watchdog's replacement).
	OffWhy string
	// Synced: the Lease's cache has synced (Found and Object are known).
	Synced bool
	Object *coordinationv1.Lease // nil: no such Lease
	Now    time.Time
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
// Lease: a holder is set and renewTime + leaseDurationSeconds
// + StandAsideGrace is still ahead. A Lease that cannot be read yet counts as held: the
// prober does not act on what it cannot see.
func DecideStandAside(in StandAsideInput) StandAsideVerdict {
	switch {
	case in.OffWhy != "":
		return StandAsideVerdict{Why: in.OffWhy}
	case !in.Synced:
		return StandAsideVerdict{Aside: true, Why: fmt.Sprintf("the Lease %s of dependency-watchdog's prober cannot be read yet (the coordinator needs get, list and watch on it)", in.Lease)}
	case in.Object == nil:
		return StandAsideVerdict{Why: fmt.Sprintf("no Lease %s: dependency-watchdog's prober does not run", in.Lease)}
	}
	l := in.Object.Spec
	holder := ptr.Deref(l.HolderIdentity, "")
	renewed := ptr.Deref(l.RenewTime, ptr.Deref(l.AcquireTime, metav1.MicroTime{})).Time
	until := renewed.Add(time.Duration(ptr.Deref(l.LeaseDurationSeconds, 0))*time.Second + StandAsideGrace)
	switch {
	case holder == "":
		return StandAsideVerdict{Why: fmt.Sprintf("the Lease %s has no holder: dependency-watchdog's prober released it", in.Lease)}
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
