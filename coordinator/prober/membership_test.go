package prober

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

func TestShardMembershipKeepsMembersNotBeforeAndGivesJoinersTheirs(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	grace := map[string]probe.NamespaceSettings{"b": {NodeMonitorGrace: time.Minute}}
	current := &probe.Membership{Namespaces: []string{"a", "b"}, Settings: map[string]probe.NamespaceSettings{"a": {NotBefore: now.Add(-time.Hour)}}}
	for _, tc := range []struct {
		name      string
		members   []string
		notBefore map[string]time.Time
		current   *probe.Membership
		want      probe.Membership
	}{
		{"a new shard: each member from its own notBefore while it is ahead",
			[]string{"b", "a"}, map[string]time.Time{"a": now.Add(30 * time.Second), "b": now.Add(-time.Second)}, nil,
			probe.Membership{Namespaces: []string{"a", "b"}, Settings: map[string]probe.NamespaceSettings{"a": {NotBefore: now.Add(30 * time.Second)}, "b": {NodeMonitorGrace: time.Minute}}}},
		{"a member keeps what the ConfigMap gave it; a joiner waits for its initial delay",
			[]string{"a", "b", "c"}, map[string]time.Time{"a": now.Add(time.Hour), "c": now.Add(30 * time.Second)}, current,
			probe.Membership{Namespaces: []string{"a", "b", "c"}, Settings: map[string]probe.NamespaceSettings{"a": {NotBefore: now.Add(-time.Hour)}, "b": {NodeMonitorGrace: time.Minute}, "c": {NotBefore: now.Add(30 * time.Second)}}}},
		{"a member that stopped being probed is gone",
			[]string{"b"}, nil, current,
			probe.Membership{Namespaces: []string{"b"}, Settings: map[string]probe.NamespaceSettings{"b": {NodeMonitorGrace: time.Minute}}}},
		{"no member left", nil, nil, current, probe.Membership{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ShardMembership(tc.members, tc.notBefore, grace, tc.current, now)
			if !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got.Data(), tc.want.Data())
			}
		})
	}
}

const followingConfig = `
prober:
  kubeConfigSecretName: shoot-access
  probeInterval: 10s
  initialDelay: 30s
  backoffJitterFactor: 0
  probeJobRunDuration: 2m
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      scaleUp: {level: 1, timeout: 30s}
      scaleDown: {level: 0, timeout: 40s}
`

func (h *probeHarness) membership(target string) probe.Membership {
	h.t.Helper()
	cm, err := h.client.CoreV1().ConfigMaps("depwatch").Get(context.Background(), jobs.MembershipName(target), metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	m, err := probe.ParseMembership(cm.Data)
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

// A shoot that becomes probe-able while its shard's Job runs joins that Job's membership at
// once (first probe after the initial delay), and one that stops being probe-able leaves it at
// once: no Job is launched for either.
func TestARunningShardJobFollowsShootsJoiningAndLeaving(t *testing.T) {
	h := newProbeHarnessWith(t, followingConfig)
	shoot := map[string]string{"gardener.cloud/role": "shoot"}
	h.namespace("shoot--p--a", shoot)
	h.reconcile("shoot--p--a")
	h.now = h.now.Add(30 * time.Second)
	h.reconcile("shoot--p--a")
	list := h.jobs()
	if len(list) != 1 {
		t.Fatalf("%d Jobs, want the shard's one", len(list))
	}
	target := jobs.ReadFacts(&list[0]).Target
	env := map[string]string{}
	for _, e := range list[0].Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["NAMESPACES_CONFIGMAP"] != "depwatch/"+jobs.MembershipName(target) || jobs.ReadFacts(&list[0]).Membership != jobs.MembershipName(target) {
		t.Fatalf("the shard's Job does not follow its ConfigMap: env %v", env)
	}
	if m := h.membership(target); !slices.Equal(m.Namespaces, []string{"shoot--p--a"}) {
		t.Fatalf("membership at launch %v", m.Namespaces)
	}

	h.now = h.now.Add(5 * time.Second)
	h.namespace("shoot--p--b", shoot) // created, or woken up
	h.reconcile("shoot--p--b")
	m := h.membership(target)
	if !slices.Equal(m.Namespaces, []string{"shoot--p--a", "shoot--p--b"}) || !m.Settings["shoot--p--b"].NotBefore.Equal(h.now.Add(30*time.Second)) {
		t.Errorf("after b joined: %v", m.Data())
	}
	h.namespace("shoot--p--a", nil) // hibernated, deleted, or no longer selected
	h.reconcile("shoot--p--a")
	if m := h.membership(target); !slices.Equal(m.Namespaces, []string{"shoot--p--b"}) {
		t.Errorf("after a left: %v", m.Namespaces)
	}
	if n := len(h.jobs()); n != 1 {
		t.Errorf("%d Jobs: a membership change must not cost a Job", n)
	}

	// The shard's Job ends, its last member leaves: the ConfigMap goes.
	h.finish(list[0].Name, batchv1.JobComplete, h.now)
	h.namespace("shoot--p--b", nil)
	h.reconcile("shoot--p--b")
	if _, err := h.client.CoreV1().ConfigMaps("depwatch").Get(context.Background(), jobs.MembershipName(target), metav1.GetOptions{}); err == nil {
		t.Error("the membership ConfigMap of a shard with no member and no Job is still there")
	}
}

// A replica that starts leading while the previous leader's shard Job runs does not take
// namespaces away from it before it has looked at every namespace.
func TestANewLeaderLeavesARunningJobsMembershipUntilItKnowsEveryNamespace(t *testing.T) {
	h := newProbeHarnessWith(t, followingConfig)
	shoot := map[string]string{"gardener.cloud/role": "shoot"}
	h.namespace("shoot--p--a", shoot)
	h.namespace("shoot--p--b", shoot)
	h.reconcile("shoot--p--a")
	h.reconcile("shoot--p--b")
	h.now = h.now.Add(30 * time.Second)
	h.reconcile(shardKey(0))
	list := h.jobs()
	if len(list) != 1 {
		t.Fatalf("%d Jobs", len(list))
	}
	target := jobs.ReadFacts(&list[0]).Target

	// A new leader: same caches, nothing decided yet.
	next := newProbeHarnessWith(t, followingConfig)
	next.client, next.now = h.client, h.now
	next.c.client = h.client
	next.namespace("shoot--p--a", shoot)
	next.namespace("shoot--p--b", shoot)
	next.c.mu.Lock()
	next.c.starting = map[string]bool{"shoot--p--a": true, "shoot--p--b": true}
	next.c.mu.Unlock()
	next.syncJobs()
	next.reconcile("shoot--p--a")
	if m := next.membership(target); !slices.Equal(m.Namespaces, []string{"shoot--p--a", "shoot--p--b"}) {
		t.Fatalf("the new leader changed the running Job's membership to %v before it saw b", m.Namespaces)
	}
	next.reconcile("shoot--p--b")
	if m := next.membership(target); !slices.Equal(m.Namespaces, []string{"shoot--p--a", "shoot--p--b"}) {
		t.Errorf("membership %v once every namespace is known", m.Namespaces)
	}
	if !strings.HasPrefix(target, "shard-0-") {
		t.Errorf("target %s", target)
	}
}
