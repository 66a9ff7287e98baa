package reaper

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Clients are a run's API clients: API for pods and EndpointSlices, Events for its Events, each
// with its own rate limit (ClientLimits), so that Events never delay a delete.
type Clients struct {
	API kubernetes.Interface
	// Events writes the run's Events; nil: the run records none (it may not).
	Events kubernetes.Interface
}

// NewClients builds a run's two clients from cfg with the run's own limits (Effective), as a
// Job's pod does: the API's, and the Events' own. noEvents leaves Events nil.
func NewClients(cfg *rest.Config, limits ClientLimits, noEvents bool) (Clients, error) {
	limits = limits.Effective()
	return ClientsFor(limits.API.Apply(cfg), limits.Events.Apply(cfg), noEvents)
}

// ClientsFor builds a run's two clients from api and events as they are, rate limiters
// included: in the coordinator's process (package coordinator/inprocess) they are the
// process's own, shared by every run and the controller (apilimit.Limit.Shared), so the run
// keeps to the process's budget and not to limits of its own. Everything a reap run reads and
// writes (pods, Events, EndpointSlices, evictions) is a built-in type, so they speak
// protobuf: several times smaller on the wire than JSON and cheaper to decode
// (docs/benchmarks.md), which is what a cycle over a large cluster spends its time on.
// noEvents leaves Events nil.
func ClientsFor(api, events *rest.Config, noEvents bool) (Clients, error) {
	var c Clients
	var err error
	if c.API, err = kubernetes.NewForConfig(protobuf(api)); err != nil {
		return Clients{}, fmt.Errorf("building a Kubernetes client: %w", err)
	}
	if noEvents {
		return c, nil
	}
	if c.Events, err = kubernetes.NewForConfig(protobuf(events)); err != nil {
		return Clients{}, fmt.Errorf("building a Kubernetes client for Events: %w", err)
	}
	return c, nil
}

// protobuf is a copy of cfg (its rate limiter the same) that speaks protobuf.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// RunWith performs the run as the package comment tells, its Events written through a client
// of their own (c.Events). It returns when ctx is cancelled (SIGTERM), every target's
// RUN_DURATION elapsed or MAX_WAIT passed first, after finishing the pod in hand. The error is
// non-nil only when the run could not do its job: the options are unusable, the services'
// EndpointSlices cannot be listed, or the last cycle could not list pods.
func RunWith(ctx context.Context, c Clients, opts Options, log logrus.FieldLogger) (Summary, error) {
	if err := opts.validate(); err != nil {
		return Summary{}, err
	}
	ev := newEvents(c.Events, log)
	defer ev.close()
	return runBatch(ctx, c.API, ev, opts, log)
}
