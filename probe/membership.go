package probe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Membership is what a shard's probe Job probes: its namespaces and their own settings. A
// shard's Job lives for probeJobRunDuration, while shoots are created, woken up and hibernated
// at any moment; so the coordinator keeps the shard's membership in a ConfigMap (Data) and
// the running Job follows it (ParseMembership): a change reaches the probing in the time a
// watch event takes, not at the shard's next Job, and costs no Job at all.
type Membership struct {
	Namespaces []string
	Settings   map[string]NamespaceSettings
}

// Data is the membership as a ConfigMap's data: the keys and formats of the run's own
// NAMESPACES and NAMESPACE_SETTINGS, so there is one encoding of a shard, not two.
func (m Membership) Data() map[string]string {
	d := map[string]string{envNamespaces: NamespacesEnv(m.Namespaces)}
	if v := NamespaceSettingsEnv(m.Settings); v != "" {
		d[envNamespaceSettings] = v
	}
	return d
}

// ParseMembership reads back what Data wrote. An empty NAMESPACES is a shard with no
// namespace left (every one moved away or stopped being probed).
func ParseMembership(data map[string]string) (Membership, error) {
	e := newEnv(func(k string) (string, bool) { v, ok := data[k]; return v, ok })
	var m Membership
	if v := strings.TrimSpace(data[envNamespaces]); v != "" {
		m.Namespaces = parseNamespaces(e, v)
	}
	if v, ok := e.Get(envNamespaceSettings); ok {
		m.Settings = parseNamespaceSettings(e, v, m.Namespaces)
	}
	if len(e.Problems) > 0 {
		return Membership{}, &envconf.ConfigError{Problems: e.Problems}
	}
	return m, nil
}

// Equal: the same namespaces in the same order with the same settings.
func (m Membership) Equal(o Membership) bool {
	return maps.Equal(m.Data(), o.Data())
}

// MembershipRef is NAMESPACES_CONFIGMAP's value for a ConfigMap.
func MembershipRef(namespace, name string) string { return namespace + "/" + name }

// parseMembershipRef reads NAMESPACES_CONFIGMAP: "<namespace>/<name>", only with NAMESPACES
// and SCHEDULE (a run of one probe per namespace ends before there is anything to follow).
func parseMembershipRef(e *envconf.Reader, v string, withNamespaces, withSchedule bool) (string, string) {
	ns, name, ok := strings.Cut(strings.TrimSpace(v), "/")
	switch {
	case !ok:
		e.Fail(envNamespacesConfigMap, v, "must be <namespace>/<name> of a ConfigMap")
	case len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0:
		e.Fail(envNamespacesConfigMap, v, "must be <namespace>/<name> of a ConfigMap: not a valid namespace or ConfigMap name")
	case !withNamespaces || !withSchedule:
		e.Fail(envNamespacesConfigMap, v, "only valid with NAMESPACES and SCHEDULE (a run of one namespace, or of one probe, has nothing to follow)")
	default:
		return ns, name
	}
	return "", ""
}

// followMembership calls apply with the membership of ConfigMap namespace/name each time it
// changes, from its first sighting until ctx ends; apply is never called twice at once. It
// watches that one ConfigMap (a field selector on its name), so it costs one watch. A
// ConfigMap that cannot be read is logged and the last good membership stays; one that is
// deleted leaves the membership as it is (the coordinator deletes it only once no Job of its
// shard runs).
func followMembership(ctx context.Context, client kubernetes.Interface, namespace, name string, apply func(Membership), log logrus.FieldLogger) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	changes := make(chan Membership, 1)
	onChange := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != name {
			return
		}
		m, err := ParseMembership(cm.Data)
		if err != nil {
			log.WithFields(logrus.Fields{"configmap": namespace + "/" + name, "action": "none", "reason": "unreadable membership"}).
				Errorf("The shard's membership ConfigMap cannot be read; the run keeps probing what it probed: %v.", err)
			return
		}
		select { // only the newest membership matters: replace one not yet applied
		case <-changes:
		default:
		}
		changes <- m
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
	}); err != nil {
		return fmt.Errorf("following the shard's membership: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-changes:
			apply(m)
		}
	}
}

// membershipDiff is what following m means for the namespaces a run probes now (each with
// the settings it was started with): those to start, those to stop, and those whose settings
// changed (stopped and started again with the new ones). A namespace's notBefore matters only
// when it starts, so a change of notBefore alone restarts nothing.
func membershipDiff(running map[string]NamespaceSettings, m Membership) (start, stop []string) {
	want := map[string]bool{}
	for _, ns := range m.Namespaces {
		want[ns] = true
		cur, ok := running[ns]
		switch {
		case !ok:
			start = append(start, ns)
		case !sameSettings(cur, m.Settings[ns]):
			stop = append(stop, ns)
			start = append(start, ns)
		}
	}
	for ns := range running {
		if !want[ns] {
			stop = append(stop, ns)
		}
	}
	slices.Sort(stop)
	return start, stop
}

func sameSettings(a, b NamespaceSettings) bool {
	a.NotBefore, b.NotBefore = time.Time{}, time.Time{} // read only when a namespace starts
	return NamespaceSettingsEnv(map[string]NamespaceSettings{"x": a}) == NamespaceSettingsEnv(map[string]NamespaceSettings{"x": b})
}
