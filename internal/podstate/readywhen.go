package podstate

import (
	"fmt"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// ReadyWhen is when a service counts as back: ReadyAny (one ready endpoint, the default, and
// dependency-watchdog v1.5's), ReadyAll (every endpoint that is not terminating is ready,
// dependency-watchdog v1.6+'s EndpointSlice semantics), or at least N ready endpoints. The
// zero value is ReadyAny. ParseReadyWhen reads what String writes.
type ReadyWhen struct {
	All bool
	Min int // ready endpoints needed when !All; 0 means 1
}

var (
	ReadyAny = ReadyWhen{}
	ReadyAll = ReadyWhen{All: true}
)

// String is "any", "all" or the minimum count.
func (w ReadyWhen) String() string {
	switch {
	case w.All:
		return "all"
	case w.Min <= 1:
		return "any"
	}
	return strconv.Itoa(w.Min)
}

// ParseReadyWhen reads "any", "all" or a count of at least 1 ("1" is "any").
func ParseReadyWhen(v string) (ReadyWhen, error) {
	switch s := strings.TrimSpace(v); s {
	case "any", "":
		return ReadyAny, nil
	case "all":
		return ReadyAll, nil
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return ReadyWhen{}, fmt.Errorf(`must be "any", "all" or a count of ready endpoints of at least 1, not %q`, v)
		}
		if n == 1 {
			return ReadyAny, nil
		}
		return ReadyWhen{Min: n}, nil
	}
}

// Ready decides whether a service with these EndpointSlices counts as back: what "the
// service is Ready" means everywhere in depwatch (the coordinator's weeder, and the gate of
// a weeder run), always over the service's slices as ServiceSlices folds them. It is a
// property of the service, not of one slice: a Service sends traffic to any ready endpoint
// of any of its slices (a large service's endpoints are spread over several; a dual-stack
// service has one per address family). A slice without endpoints says nothing is ready. An endpoint listed
// by several slices (a dual-stack service has a slice per address family; a slice being
// replaced overlaps its successor) counts once, by its target (its pod) or else its first
// address, and is ready when any copy is. A ready
// condition that is not set counts as ready (discovery/v1: "nil should be interpreted as
// true"). Terminating endpoints are never ready and are not among "all": a member that is
// being replaced does not hold its service back.
func (w ReadyWhen) Ready(slices []*discoveryv1.EndpointSlice) bool {
	ready, live := map[string]bool{}, map[string]bool{}
	for _, s := range slices {
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			key := endpointKey(e)
			isReady := e.Conditions.Ready == nil || *e.Conditions.Ready
			if e.Conditions.Terminating != nil && *e.Conditions.Terminating && !isReady {
				continue
			}
			live[key] = true
			if isReady {
				ready[key] = true
			}
		}
	}
	if w.All {
		return len(live) > 0 && len(ready) == len(live)
	}
	return len(ready) >= max(w.Min, 1)
}

// endpointKey names the thing behind an endpoint: its target object, else its address.
func endpointKey(e *discoveryv1.Endpoint) string {
	if r := e.TargetRef; r != nil && r.Name != "" {
		return "ref/" + r.Kind + "/" + r.Namespace + "/" + r.Name
	}
	if len(e.Addresses) > 0 {
		return "addr/" + e.Addresses[0]
	}
	return fmt.Sprintf("anon/%p", e) // no name at all: itself
}

// MarshalText writes String, so a readyWhen travels in JSON (a weeder Job's TARGETS) as
// "any", "all" or "2".
func (w ReadyWhen) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText is ParseReadyWhen.
func (w *ReadyWhen) UnmarshalText(b []byte) error {
	v, err := ParseReadyWhen(string(b))
	if err != nil {
		return err
	}
	*w = v
	return nil
}
