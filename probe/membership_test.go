package probe

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the coordinator writes into a shard's ConfigMap, the running Job reads back.
func TestMembershipRoundTripsThroughConfigMapData(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC)
	for _, m := range []Membership{
		{Namespaces: []string{"shoot--a", "shoot--b"}, Settings: map[string]NamespaceSettings{
			"shoot--a": {NodeMonitorGrace: 2 * time.Minute, NodeConditions: map[string][]string{"pool": {"Custom"}}},
			"shoot--b": {NotBefore: at},
		}},
		{Namespaces: []string{"shoot--a"}},
		{}, // every namespace left the shard
	} {
		got, err := ParseMembership(m.Data())
		if err != nil {
			t.Fatalf("%v: %v", m.Data(), err)
		}
		if !got.Equal(m) || !slices.Equal(got.Namespaces, m.Namespaces) {
			t.Errorf("wrote %v, read back %+v", m.Data(), got)
		}
	}
	if _, err := ParseMembership(map[string]string{"NAMESPACES": "a", "NAMESPACE_SETTINGS": `{"b":{}}`}); err == nil {
		t.Error("settings of a namespace that is not a member were accepted")
	}
	// A membership ConfigMap whose grace the coordinator would never write (whoever wrote it)
	// is refused: the run keeps the membership it had and scales nothing on it.
	if _, err := ParseMembership(map[string]string{"NAMESPACES": "a", "NAMESPACE_SETTINGS": `{"a":{"nodeMonitorGrace":"1ns"}}`}); err == nil ||
		!strings.Contains(err.Error(), "must be at least 10s") {
		t.Errorf("a 1ns grace in a membership ConfigMap: err = %v, want it refused", err)
	}
}

func TestMembershipDiffStartsJoinersStopsLeaversAndRestartsChangedSettings(t *testing.T) {
	later := time.Now().Add(time.Hour)
	running := map[string]NamespaceSettings{"a": {}, "b": {NodeMonitorGrace: time.Minute}, "c": {}}
	for _, tc := range []struct {
		name        string
		m           Membership
		start, stop []string
	}{
		{"unchanged", Membership{Namespaces: []string{"a", "b", "c"}, Settings: map[string]NamespaceSettings{"b": {NodeMonitorGrace: time.Minute}}}, nil, nil},
		{"a namespace joins", Membership{Namespaces: []string{"a", "b", "c", "d"}, Settings: map[string]NamespaceSettings{"b": {NodeMonitorGrace: time.Minute}}}, []string{"d"}, nil},
		{"a namespace leaves", Membership{Namespaces: []string{"a", "b"}, Settings: map[string]NamespaceSettings{"b": {NodeMonitorGrace: time.Minute}}}, nil, []string{"c"}},
		{"a grace changes: restarted", Membership{Namespaces: []string{"a", "b", "c"}, Settings: map[string]NamespaceSettings{"b": {NodeMonitorGrace: 2 * time.Minute}}}, []string{"b"}, []string{"b"}},
		{"only notBefore changes: nothing", Membership{Namespaces: []string{"a", "b", "c"}, Settings: map[string]NamespaceSettings{"a": {NotBefore: later}, "b": {NodeMonitorGrace: time.Minute}}}, nil, nil},
		{"all leave", Membership{}, nil, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, stop := membershipDiff(running, tc.m)
			if !slices.Equal(start, tc.start) || !slices.Equal(stop, tc.stop) {
				t.Errorf("start %v stop %v, want start %v stop %v", start, stop, tc.start, tc.stop)
			}
		})
	}
}

// A shoot that starts hibernating leaves its shard's membership while the Job runs: from
// then on it is neither probed nor scaled, even when its leases expire right after; a shoot
// that joins is probed from its notBefore on, in the same run.
func TestARunFollowsItsShardsMembership(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.healthy()
	const joiner = "shoot--proj--new"
	opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))
	opts.Namespace, opts.Namespaces, opts.Concurrency = "", []string{testNS}, 100
	opts.ScheduleSpec, opts.RunDuration = "@every 1s", 3500*time.Millisecond
	opts.Schedule, _ = envconf.CronParser.Parse(opts.ScheduleSpec)
	opts.MembershipNamespace, opts.MembershipName = "depwatch", "shard-0"
	cms := c.seed.CoreV1().ConfigMaps("depwatch")
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shard-0", Namespace: "depwatch"},
		Data: Membership{Namespaces: []string{testNS}}.Data()}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The shoot leaves (hibernation), a new one joins; then the leaves' leases expire.
	go func() {
		time.Sleep(1200 * time.Millisecond)
		cm.Data = Membership{Namespaces: []string{joiner}}.Data()
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
		time.Sleep(300 * time.Millisecond)
		for _, name := range []string{"node-a", "node-b", "node-c"} {
			l := lease(name, expired)
			if _, err := c.shoot.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}
	}()
	rep, _, err := RunAll(ctx, c.deps(), opts, c.logger())
	if err != nil {
		t.Fatal(err)
	}
	if n := c.replicas(gvrDeployments, "kube-controller-manager"); n != 2 {
		t.Errorf("the namespace that left the shard was scaled to %d after it left", n)
	}
	if _, ok := findLog(c.logs.String(), "reason", "left the shard's membership"); !ok {
		t.Error("no log line says the namespace left the shard")
	}
	if e := rep.Namespaces[joiner]; e.Last == ResultNotProbed || e.Last == "" {
		t.Errorf("the namespace that joined was not probed in the run: %+v", rep.Namespaces)
	}
	if e := rep.Namespaces[testNS]; e.Last != ResultHealthy {
		t.Errorf("the namespace that left: last result %q, want its last probe before it left (healthy)", e.Last)
	}
}
