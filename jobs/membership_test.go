package jobs

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/depwatch/depwatch/probe"
)

// TestTheJobExecutorKeepsAMembershipInItsConfigMap: Set writes the ConfigMap a probe pod
// follows, Get reads it back from the cache, a namespace that leaves it is told, and Delete
// removes it.
func TestTheJobExecutorKeepsAMembershipInItsConfigMap(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	var left []string
	members := InCluster(client).Memberships("depwatch", func(ns []string) { mu.Lock(); left = append(left, ns...); mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go members.RunWithContext(ctx)
	settle := func(what string, done func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return done(), nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	settle("sync", members.HasSynced)

	ab := probe.Membership{Namespaces: []string{"shoot--a", "shoot--b"}, Settings: map[string]probe.NamespaceSettings{"shoot--b": {NodeMonitorGrace: time.Minute}}}
	if changed, err := members.Set(ctx, "shard-0", ab); !changed || err != nil {
		t.Fatalf("create: changed %v, %v", changed, err)
	}
	cm, err := client.CoreV1().ConfigMaps("depwatch").Get(ctx, MembershipName("shard-0"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := probe.ParseMembership(cm.Data); err != nil || !m.Equal(ab) || cm.Labels[LabelKind] != string(KindProbe) {
		t.Fatalf("the ConfigMap holds %v (%v), labels %v", cm.Data, err, cm.Labels)
	}
	settle("the cache", func() bool { m, ok := members.Get("shard-0"); return ok && m.Equal(ab) })
	if changed, err := members.Set(ctx, "shard-0", ab); changed || err != nil {
		t.Errorf("the same membership again: changed %v, %v", changed, err)
	}

	b := probe.Membership{Namespaces: []string{"shoot--b"}}
	if changed, err := members.Set(ctx, "shard-0", b); !changed || err != nil {
		t.Fatalf("update: changed %v, %v", changed, err)
	}
	settle("shoot--a left", func() bool { return slices.Equal(left, []string{"shoot--a"}) })

	if err := members.Delete(ctx, "shard-0"); err != nil {
		t.Fatal(err)
	}
	settle("shoot--b left", func() bool { return slices.Equal(left, []string{"shoot--a", "shoot--b"}) })
	if _, ok := members.Get("shard-0"); ok {
		t.Error("a deleted membership is still there")
	}
	if err := members.Delete(ctx, "shard-0"); err != nil {
		t.Errorf("deleting it again: %v", err)
	}
}
