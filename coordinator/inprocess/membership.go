package inprocess

import (
	"context"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// memberships are the shards' memberships as values, by namespace/name of the ConfigMap a
// Job's pod would follow (the run's NAMESPACES_CONFIGMAP), each change pushed to the runs
// that follow it: no ConfigMap, no watch.
type memberships struct {
	mu     sync.Mutex
	byName map[string]probe.Membership
	runs   map[chan probe.Membership]string // the runs, each by the membership it follows
}

// shardMemberships is a controller's jobs.Memberships in one namespace: its own changes are
// the only ones, so left is told of them as it makes them.
type shardMemberships struct {
	all       *memberships
	namespace string
	left      func([]string)
}

// Memberships keeps the shards' memberships in namespace; left is told the namespaces that
// leave one.
func (e *Executor) Memberships(namespace string, left func([]string)) jobs.Memberships {
	return &shardMemberships{all: e.members, namespace: namespace, left: left}
}

func (s *shardMemberships) name(target string) string {
	return s.namespace + "/" + jobs.MembershipName(target)
}

// RunWithContext has nothing to follow: the memberships are this process's own values.
func (*shardMemberships) RunWithContext(ctx context.Context) { <-ctx.Done() }
func (*shardMemberships) HasSynced() bool                    { return true }

func (s *shardMemberships) Get(target string) (probe.Membership, bool) {
	s.all.mu.Lock()
	defer s.all.mu.Unlock()
	m, ok := s.all.byName[s.name(target)]
	return m, ok
}

// Set keeps m and hands it to the shard's running runs at once.
func (s *shardMemberships) Set(_ context.Context, target string, m probe.Membership) (bool, error) {
	name := s.name(target)
	s.all.mu.Lock()
	old, had := s.all.byName[name]
	if had && old.Equal(m) {
		s.all.mu.Unlock()
		return false, nil
	}
	s.all.byName[name] = m
	for ch, following := range s.all.runs {
		// Replace what ch holds: a run applies only the newest membership. The lock is held,
		// so no other send comes between the two steps.
		if following == name {
			select {
			case <-ch:
			default:
			}
			ch <- m
		}
	}
	s.all.mu.Unlock()
	s.tell(jobs.Departed(old.Namespaces, m.Namespaces))
	return true, nil
}

// Delete forgets the membership; a run still following it keeps the last one, as a pod
// keeps its deleted ConfigMap's.
func (s *shardMemberships) Delete(_ context.Context, target string) error {
	s.all.mu.Lock()
	old := s.all.byName[s.name(target)]
	delete(s.all.byName, s.name(target))
	s.all.mu.Unlock()
	s.tell(old.Namespaces)
	return nil
}

func (s *shardMemberships) tell(left []string) {
	if len(left) > 0 {
		s.left(left)
	}
}

// followMembership is a probe run's membership source (probe.Deps.FollowMembership): the
// membership namespace/name, the current one first, then each change, until ctx ends.
func (e *Executor) followMembership(ctx context.Context, namespace, name string, apply func(probe.Membership), _ logrus.FieldLogger) error {
	a, key := e.members, namespace+"/"+name
	ch := make(chan probe.Membership, 1)
	a.mu.Lock()
	a.runs[ch] = key
	if m, ok := a.byName[key]; ok {
		ch <- m
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.runs, ch)
		a.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			apply(m)
		}
	}
}
