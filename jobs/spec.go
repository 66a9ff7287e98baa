// Package jobs is the one place in depwatch that knows what a Job looks like.
//
// A Spec (a weeder run, WeederSpec, or a probe run, ProbeSpec) plus the Template from the
// coordinator's config becomes a batch/v1 Job: its name, labels, annotations, environment,
// deadlines, TTL, security context and the template overrides. Build is a pure function;
// Launcher creates the Job with de-duplication (at most one active Job per target).
//
// Jobs run in the coordinator's own namespace and reach the namespace they act on through
// the NAMESPACE variable. That keeps the coordinator's rights small (it may create Jobs in
// one namespace only, instead of pods in every namespace, which would let it run anything as
// any service account there), keeps every Job's log in one place (`kubectl -n depwatch logs
// -l depwatch.io/service=<svc>`), and lets that namespace enforce the restricted pod-security
// level for all of them.
package jobs

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/reaper"
)

// Kind is the kind of work a Job does; it selects the subcommand, the service account and
// the component label.
type Kind string

const (
	// KindWeeder restarts crash-looping dependents of a service that came back (`depwatch reap`).
	KindWeeder Kind = "weeder"
	// KindProbe runs meltdown protection for one namespace (`depwatch probe`).
	KindProbe Kind = "probe"
	// KindReap is a plain reaper run (`depwatch reap`).
	KindReap Kind = "reap"
)

// Labels and annotations every depwatch Job carries (on the Job and on its pods).
const (
	LabelAppName   = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelKind      = "depwatch.io/kind"
	LabelNamespace = "depwatch.io/namespace"
	LabelService   = "depwatch.io/service"

	// AnnotationTriggerTime is when the coordinator saw what caused the Job (RFC 3339, ns).
	AnnotationTriggerTime = "depwatch.io/trigger-time"
	// AnnotationTrigger says what caused the Job: see the Trigger* constants.
	AnnotationTrigger = "depwatch.io/trigger"
	// AnnotationArmedAt is when an armed weeder was launched: the outage began (RFC 3339, ns).
	AnnotationArmedAt = "depwatch.io/armed-at"
	// AnnotationTarget is the full <namespace>/<service> the Job acts for (labels may be hashed).
	AnnotationTarget = "depwatch.io/target"

	AppName = "depwatch"
)

// Why a Job was launched (the value of AnnotationTrigger).
const (
	TriggerReady   = "ready"    // the service went from no ready endpoint to at least one
	TriggerCatchUp = "catch-up" // found Ready with crash-looping dependents at start / on leadership
	TriggerManual  = "manual"
	// TriggerOutage: the service went from Ready to no ready endpoint; the weeder is launched
	// armed (START_WHEN_READY) and starts reaping the moment the service is Ready again.
	TriggerOutage = "outage"
)

// DefaultArmedMaxWait is how long an armed weeder waits for its service by default (MAX_WAIT).
const DefaultArmedMaxWait = 6 * time.Hour

// UnarmedGateWait is MAX_WAIT of a weeder launched on a return: how long it waits when its
// service is already down again by the time its pod starts.
const UnarmedGateWait = time.Minute

// DefaultWeederReapCooldown is a weeder's REAP_COOLDOWN by default: once it restarted pods of
// a controller, it restarts that controller's new pods again only after this long. The
// kubelet's own back-off restarts a crash-looping container after 10 s, 20 s, 40 s, 80 s, ...
// (capped at 5 min): within a minute it retries a replacement twice by itself (about 10 s and
// 30 s after its first crash), so deleting it sooner buys nothing but a new pod (scheduling,
// image, init containers) and a reset back-off. After that the kubelet would wait 80 s and
// more, so a dependent that is still failing gets one more restart a minute: at most
// 1 + floor(watchDuration / 1m) rounds per controller, 6 with the default watchDuration 5m.
const DefaultWeederReapCooldown = time.Minute

// Security defaults: the restricted pod-security level, the distroless nonroot user.
const (
	DefaultUID          int64 = 65532
	DefaultBackoffLimit int32 = 2
	DefaultTTL          int32 = 3600
	// DefaultDeadlineMargin is added to a Job's run duration for activeDeadlineSeconds: the
	// time for the pod to be scheduled, pull, start, and finish its summary.
	DefaultDeadlineMargin = 2 * time.Minute
	// ExitBadConfig is the exit code with which every depwatch subcommand refuses bad config;
	// a pod failing with it fails the Job at once (retrying cannot fix it).
	ExitBadConfig int32 = 2
)

// ActivePolicy says what Launch does when a Job for the same target is still active.
type ActivePolicy string

const (
	// ReplaceActive deletes the active Job(s) (propagation Background) and creates the new one.
	ReplaceActive ActivePolicy = "Replace"
	// KeepActive leaves the active Job running and creates nothing (e.g. probes, never two at once).
	KeepActive ActivePolicy = "Keep"
)

// Spec is what one Job must do, independent of how Jobs are templated in this installation.
// Build it with a kind's constructor (Weeder) rather than by hand.
type Spec struct {
	Kind Kind
	// Namespace the Job acts on (NAMESPACE of the run, label depwatch.io/namespace).
	Namespace string
	// Service the Job acts for (weeder); empty for namespace-wide kinds.
	Service string
	// Trigger says why (AnnotationTrigger); TriggerTime when the cause was seen.
	Trigger     string
	TriggerTime time.Time
	// RunDuration is how long the run lasts; activeDeadlineSeconds is this plus the margin.
	RunDuration time.Duration
	// Env is the engine's environment, from its JobSettings.Env (reaper, probe): jobs names
	// no variable of its own. The template's extra env cannot override it.
	Env []corev1.EnvVar
	// ExtraLabels of the kind's own (e.g. one per namespace a probe Job covers); depwatch's
	// common keys win. They are not part of the de-duplication lookup.
	ExtraLabels map[string]string
	// Args for the depwatch binary, e.g. ["reap"].
	Args []string
	// OnActive is the de-duplication policy for Launch.
	OnActive ActivePolicy
	// Batch lists the <namespace>/<service> targets of a weeder Job that covers several
	// services (WeederBatch); empty for a Job of one target.
	Batch []string
	// Namespaces a probe Job of a shard probes (AnnotationNamespaces): at its start, when
	// it follows Membership (AnnotationMembership), the ConfigMap it follows.
	Namespaces []string
	Membership string
	// Armed: a weeder launched when its service went down, to wait for its return
	// (AnnotationArmed, and AnnotationArmedAt = TriggerTime).
	Armed bool
}

// WeederSpec describes a weeder run: restart the crash-looping dependents of one service.
// Its values are taken as they are: the coordinator's config applies the defaults
// (DefaultArmedMaxWait, DefaultWeederReapCooldown, reaper.DefaultBackOffFloor).
type WeederSpec struct {
	Namespace string
	Service   string
	// Selectors are the service's dependents' pod selectors in its namespace, OR-ed. None
	// may be empty.
	Selectors []metav1.LabelSelector
	// Elsewhere are its dependents in other namespaces (a workload's depends-on annotation
	// may name another namespace's Service): namespace → their pod selectors, OR-ed. The run
	// is then a TARGETS run, one target per namespace, every one gated on the service.
	Elsewhere map[string][]metav1.LabelSelector
	// WatchDuration is how long the weeder keeps watching for crash-looping dependents.
	WatchDuration time.Duration
	// GracePeriod for deleting a pod; nil keeps each pod's own.
	GracePeriod *time.Duration
	Trigger     string
	TriggerTime time.Time
	// Armed: the weeder is launched when the outage begins and waits for the service
	// (START_WHEN_READY=<namespace>/<service>, at most MaxWait, which must then be positive)
	// before it reaps; its activeDeadlineSeconds covers MaxWait + WatchDuration + the margin.
	Armed   bool
	MaxWait time.Duration
	// ReapCooldown is REAP_COOLDOWN: 0 = off (every crash-looping pod on every event,
	// pod-reaper's behaviour); negative is refused.
	ReapCooldown time.Duration
	// ReadyWhen is READY_WHEN, when the service counts as back (zero: any).
	ReadyWhen podstate.ReadyWhen
	// BackOffFloor is BACKOFF_FLOOR: 0 = off.
	BackOffFloor time.Duration
	// Client is the run's API rate limits (KUBE_API_*); zero: the run's defaults, which fit
	// one service. A batch Job's are sized by its number of services.
	Client reaper.ClientLimits
}

// Weeder turns a WeederSpec into a Spec for a `depwatch reap` run in WATCH mode restarting
// CrashLoopBackOff pods of the service's dependents (its selectors, OR-ed), with a
// REAP_COOLDOWN (a dependent broken for another reason is restarted at a bounded rate). A new
// transition while a weeder for the same service is active replaces it: the new run starts
// its watchDuration afresh and the old one is deleted (propagation Background).
func Weeder(w WeederSpec) (Spec, error) {
	run, err := weederRun(w)
	if err == nil && len(w.Elsewhere) > 0 {
		var targets []reaper.Target
		if targets, err = weederTargets(w, run.Selectors); err == nil {
			run = targeted(run, targets)
		}
	}
	if err != nil {
		return Spec{}, err
	}
	return weederJob(w, run), nil
}

// weederTargets are the TARGETS of w's one service: its dependents in its own namespace (sels,
// its run's), then those in each other namespace (Elsewhere), in name order.
func weederTargets(w WeederSpec, sels []string) ([]reaper.Target, error) {
	var ready *podstate.ReadyWhen
	if w.ReadyWhen != podstate.ReadyAny {
		ready = ptr.To(w.ReadyWhen) // TARGETS stays short for the default
	}
	var out []reaper.Target
	if len(sels) > 0 {
		out = append(out, reaper.Target{Namespace: w.Namespace, Service: w.Service, Selectors: sels, ReadyWhen: ready})
	}
	for _, ns := range slices.Sorted(maps.Keys(w.Elsewhere)) {
		sels, err := SelectorStrings(w.Elsewhere[ns])
		if err == nil && ns == w.Namespace {
			err = errors.New("belong in Selectors: they are in the service's own namespace")
		}
		if err != nil {
			return nil, fmt.Errorf("weeder %s/%s: dependents in namespace %s: %w", w.Namespace, w.Service, ns, err)
		}
		out = append(out, reaper.Target{Namespace: w.Namespace, Service: w.Service, PodNamespace: ns, Selectors: sels, ReadyWhen: ready})
	}
	return out, nil
}

// targeted is run as a TARGETS run: the targets replace its one namespace, selectors and gate.
func targeted(run reaper.JobSettings, targets []reaper.Target) reaper.JobSettings {
	run.Namespace, run.Selectors, run.StartWhenReady, run.Targets = "", nil, nil, targets
	run.ReadyWhen = podstate.ReadyAny // each target carries its own
	return run
}

// weederRun checks w and works out the reaper's settings of its run.
func weederRun(w WeederSpec) (reaper.JobSettings, error) {
	if w.Namespace == "" || w.Service == "" {
		return reaper.JobSettings{}, fmt.Errorf("weeder: namespace and service are required (got %q/%q)", w.Namespace, w.Service)
	}
	sels, selErr := SelectorStrings(w.Selectors)
	var err error
	switch {
	case len(w.Selectors) == 0 && len(w.Elsewhere) == 0:
		err = errors.New("at least one pod selector is required")
	case w.WatchDuration <= 0:
		err = fmt.Errorf("watch duration must be positive, got %s", w.WatchDuration)
	case selErr != nil:
		err = selErr
	case w.ReapCooldown < 0 || w.BackOffFloor < 0:
		err = fmt.Errorf("reap cooldown and back-off floor must not be negative, got %s and %s", w.ReapCooldown, w.BackOffFloor)
	case w.Armed && w.MaxWait <= 0:
		err = fmt.Errorf("max wait must be positive, got %s", w.MaxWait)
	}
	if err != nil {
		return reaper.JobSettings{}, fmt.Errorf("weeder %s/%s: %w", w.Namespace, w.Service, err)
	}
	// Every weeder follows its service (START_WHEN_READY). An armed one waits up to MAX_WAIT
	// for the return. One launched on a return finds the service Ready and starts at once;
	// the gate is there for what follows: if the service goes down again while the weeder
	// runs, the dependents crash because of that new outage, and the weeder stops reaping
	// until the service is back (the coordinator also stops the Job, but after the fact).
	gateWait := UnarmedGateWait
	if w.Armed {
		gateWait = w.MaxWait
	}
	return reaper.JobSettings{
		Watch:             true,
		ContainerStatuses: []string{reaper.ReasonCrashLoopBackOff},
		Selectors:         sels,
		Namespace:         w.Namespace,
		RunDuration:       w.WatchDuration,
		GracePeriod:       w.GracePeriod,
		ReapCooldown:      w.ReapCooldown,
		StartWhenReady:    &reaper.ServiceRef{Namespace: w.Namespace, Name: w.Service},
		MaxWait:           gateWait,
		ReadyWhen:         w.ReadyWhen,
		BackOffFloor:      w.BackOffFloor,
		Client:            w.Client,
		// Deletes only, never evictions: the admission policy on a weeder's own actions
		// (manifests/admission/weeder-deletes.yaml) reads the pod a DELETE names and admits
		// it when the pod crash-loops; an Eviction names a pod the policy cannot read, so it
		// refuses them all (docs/security.md: the PodDisruptionBudget question).
		Evict: false,
	}, nil
}

// weederJob is the Spec of w's weeder Job running run; its deadline covers the longest wait
// for the service and the watch after it. Its trigger, unless w says, is the service's
// return, or the outage that armed it.
func weederJob(w WeederSpec, run reaper.JobSettings) Spec {
	trigger := TriggerReady
	if w.Armed {
		trigger = TriggerOutage
	}
	return Spec{
		Kind:        KindWeeder,
		Namespace:   w.Namespace, // a TARGETS run names no namespace of its own
		Service:     w.Service,
		Trigger:     cmp.Or(w.Trigger, trigger),
		TriggerTime: w.TriggerTime,
		Armed:       w.Armed,
		RunDuration: run.RunDuration + run.MaxWait,
		Env:         run.Env(),
		Args:        []string{"reap"},
		OnActive:    ReplaceActive,
	}
}

// SelectorStrings converts label selectors to their string form, refusing an empty one (it
// would select every pod) and invalid ones.
func SelectorStrings(sels []metav1.LabelSelector) ([]string, error) {
	out := make([]string, 0, len(sels))
	for i := range sels {
		s, err := metav1.LabelSelectorAsSelector(&sels[i])
		if err != nil {
			return nil, fmt.Errorf("pod selector %d: %w", i, err)
		}
		if s.Empty() {
			return nil, fmt.Errorf("pod selector %d is empty: it would select every pod", i)
		}
		out = append(out, s.String())
	}
	return out, nil
}

// Labels identify the Jobs of one target: the Job, its pods, and the de-duplication lookup.
func (s Spec) Labels() map[string]string {
	l := map[string]string{
		LabelAppName:   AppName,
		LabelComponent: string(s.Kind),
		LabelManagedBy: managedBy,
		LabelKind:      string(s.Kind),
	}
	if len(s.Batch) > 0 {
		l[LabelBatch] = "true"
		return l
	}
	l[LabelNamespace] = LabelValue(s.Namespace)
	if s.Service != "" {
		l[LabelService] = LabelValue(s.Service)
	}
	return l
}

// Target is <namespace>/<service>, or <namespace> for namespace-wide kinds.
func (s Spec) Target() string {
	if len(s.Batch) > 0 {
		return "batch-" + shortHash(strings.Join(s.Batch, ","))
	}
	if s.Service == "" {
		return s.Namespace
	}
	return s.Namespace + "/" + s.Service
}

// Name is the Job's name: <kind>-<service or namespace, shortened>-<hash of the target>-<trigger
// time in base 36 ms>. Stable prefix per target, unique per trigger, DNS-1123 and ≤ 52
// characters, so the Job controller's pod names (name + "-" + 5) stay ≤ 63 too.
func (s Spec) Name() string {
	const maxBase = 22
	batch := ""
	if len(s.Batch) > 0 {
		batch = "batch"
	}
	base := dnsSafe(cmp.Or(batch, s.Service, s.Namespace))
	if len(base) > maxBase {
		base = strings.TrimRight(base[:maxBase], "-")
	}
	ts := strconv.FormatInt(s.TriggerTime.UnixMilli(), 36)
	name := string(s.Kind) + "-"
	if base != "" {
		name += base + "-"
	}
	return name + shortHash(s.Target()) + "-" + ts
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

func dnsSafe(s string) string {
	s = notDNS.ReplaceAllString(strings.ToLower(s), "-")
	return strings.Trim(s, "-")
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

var notLabel = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// LabelValue returns v if it is a valid label value, else a valid one derived from it
// (sanitised, shortened, with a hash of the original so distinct inputs stay distinct).
// Namespace and Service names are always valid label values; this guards the rest.
func LabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	s := notLabel.ReplaceAllString(v, "-")
	if len(s) > 54 {
		s = s[:54]
	}
	s = strings.Trim(s, "-_.")
	if s == "" {
		return shortHash(v)
	}
	return s + "-" + shortHash(v)
}
