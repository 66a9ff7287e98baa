package weeder

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/depwatch/depwatch/jobs"
)

// serviceState is what the weeder knows of one service besides the caches.
type serviceState struct {
	// view is the handler's own picture of the service's endpoints objects, folded event by
	// event: the informer's cache may already be past the event being handled, and reading
	// it instead could skip an outage shorter than the gap between two events.
	view view
	// seen is the readiness after the last event folded: the "before" of the next edge.
	seen Observation
	// relevant: configured and in a watched namespace when last looked at. A namespace's
	// labels change it, and a service that becomes relevant counts as first seen.
	relevant bool
	// inReadyGauge: the service is counted in services_ready, so it is taken out once.
	inReadyGauge bool
	// excluded: followed, but in a namespace the config leaves out; counted in
	// weeder_services_excluded and warned about once (exclusion.go).
	excluded bool
	// owed is the edge owed an action: the last one the handler recorded, with the time it
	// happened. The sync acts on it however late the queue reaches the key, which is why no
	// outage is lost: the cache, read later, would show only where the service ended up. A
	// newer edge replaces it, because the older one is over (its outage ended, or its return
	// was followed by a new outage): the action for the newer one is what can still help.
	owed *recordedEdge
	// launched is the last weeder Job this coordinator created for the service. While the
	// Job cache has not shown it (jobExpectations), it covers the service all the same.
	launched *launchedJob
}

// onJobAdded: the view shows the run, so it is no longer only expected.
func (c *Controller) onJobAdded(r jobs.Run) {
	c.mu.Lock()
	c.expectations.observe(r.Name, c.now())
	c.mu.Unlock()
}

// state returns (creating) the state of key; c.mu must be held.
func (c *Controller) state(key string) *serviceState {
	st, ok := c.services[key]
	if !ok {
		st = &serviceState{}
		c.services[key] = st
	}
	return st
}

// recordedEdge is an edge owed an action.
type recordedEdge struct {
	edge Edge
	// trigger is the Job's trigger: ready, outage or catch-up ("gone" for EdgeGone).
	trigger string
	// at is when the handler saw the edge: the weeder's latency counts from it.
	at time.Time
	// catchUp: a Ready service first seen, or found Ready on taking the lead: act only if a
	// dependent is crash-looping, and keep any weeder already active.
	catchUp bool
	// triggerCounted: in triggers_total already (a retry does not count it again).
	triggerCounted bool
}

// catchUpEdge is the edge of a Ready service the weeder has no history of: it says nothing
// of what happened before, so a crash-looping dependent may be owed a weeder.
func catchUpEdge(at time.Time) *recordedEdge {
	return &recordedEdge{edge: EdgeReady, trigger: jobs.TriggerCatchUp, at: at, catchUp: true}
}

// launchedJob is a weeder Job this coordinator created for a service.
type launchedJob struct {
	name  string
	uid   types.UID
	armed bool
	// own: the Job covers this service alone, so it may be replaced or stopped for it.
	own bool
}

// expectationTTL is how long a created Job is expected before the Job cache shows it, as
// kube-controller-manager's ControllerExpectations do with their timeout: a Job deleted
// before the cache ever saw it would otherwise count as active for ever.
const expectationTTL = 2 * time.Minute

// jobExpectations are the weeder Jobs created (name → when) that the Job cache has not
// shown yet: expected on create, observed when the Job informer adds the Job, dropped after
// expectationTTL. Between the create and the informer's add, only they say that the service
// is covered and that the Job counts under --max-weeder-jobs. The informer may show a Job
// before its creator expects it, and it may be gone from the cache by then (an in-process run
// that ends at once): that sighting is kept, and the expectation it answers is never made.
// The caller holds Controller.mu.
type jobExpectations map[string]expectation

type expectation struct {
	at   time.Time
	seen bool // the informer showed the Job first
}

func (e jobExpectations) expect(name string, now time.Time) {
	if x, ok := e[name]; ok && x.seen {
		delete(e, name)
		return
	}
	e[name] = expectation{at: now}
}

func (e jobExpectations) observe(name string, now time.Time) {
	if x, ok := e[name]; ok && !x.seen {
		delete(e, name)
		return
	}
	e[name] = expectation{at: now, seen: true}
}

// pending: name was created, and neither observed nor expired.
func (e jobExpectations) pending(name string, now time.Time) bool {
	x, ok := e[name]
	return ok && !x.seen && now.Sub(x.at) < expectationTTL
}

// count is the number of pending expectations; expired ones (and sightings) are dropped.
func (e jobExpectations) count(now time.Time) int {
	n := 0
	for name, x := range e {
		if now.Sub(x.at) >= expectationTTL {
			delete(e, name)
			continue
		}
		if !x.seen {
			n++
		}
	}
	return n
}
