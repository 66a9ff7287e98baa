package reaper

import (
	"context"
	"fmt"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
)

// gate follows the readiness of START_WHEN_READY's service: Ready as READY_WHEN
// (podstate.ReadyWhen, default any: podstate.SlicesReady) says, over its EndpointSlices
// (label kubernetes.io/service-name). It never reaps: the run's single goroutine reads Ready
// when changed is signalled.
type gate struct {
	ref     ServiceRef
	changed chan struct{} // signalled (never blocking) when readiness may have changed

	mu    sync.Mutex
	ready bool

	factory informers.SharedInformerFactory
	wg      sync.WaitGroup
}

// startGate lists the service's EndpointSlices once (so a missing right or API fails the run
// at once, and a service that is already Ready opens the gate at once), then follows them
// with an informer until stop ends. onSynced (tests) runs once the informer has synced.
func startGate(stop context.Context, client kubernetes.Interface, ref ServiceRef, when podstate.ReadyWhen, onSynced func()) (*gate, error) {
	sel := discoveryv1.LabelServiceName + "=" + ref.Name
	list, err := client.DiscoveryV1().EndpointSlices(ref.Namespace).List(stop, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of service %s (START_WHEN_READY): %w", ref, err)
	}
	g := &gate{ref: ref, changed: make(chan struct{}, 1)}
	items := make([]any, len(list.Items))
	for i := range list.Items {
		items[i] = &list.Items[i]
	}
	g.set(serviceReady(ref, when, items))

	g.factory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(ref.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = sel }))
	inf := g.factory.Discovery().V1().EndpointSlices().Informer()
	isSynced := make(chan struct{})
	reevaluate := func() {
		select {
		case <-isSynced:
		default:
			return // a partial store during the first list says nothing; sync decides below
		}
		g.set(serviceReady(ref, when, inf.GetStore().List()))
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { reevaluate() },
		UpdateFunc: func(_, _ any) { reevaluate() },
		DeleteFunc: func(any) { reevaluate() },
	})
	g.factory.Start(stop.Done())
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if cache.WaitForCacheSync(stop.Done(), inf.HasSynced) {
			close(isSynced)
			reevaluate()
			if onSynced != nil {
				onSynced()
			}
		}
	}()
	return g, nil
}

func (g *gate) set(ready bool) {
	g.mu.Lock()
	changed := g.ready != ready
	g.ready = ready
	g.mu.Unlock()
	if changed {
		select {
		case g.changed <- struct{}{}:
		default:
		}
	}
}

// Ready reports the service's last known readiness.
func (g *gate) Ready() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ready
}

// shutdown waits for the informer's goroutines; the stop context must be cancelled first.
func (g *gate) shutdown() {
	g.factory.Shutdown()
	g.wg.Wait()
}

// serviceReady is podstate.ObjectsReadyWhen over the service's own slices: slices of other
// services are dropped, should a lenient API return them.
func serviceReady(ref ServiceRef, when podstate.ReadyWhen, objs []any) bool {
	own := objs[:0:0]
	for _, o := range objs {
		if keys, _ := podstate.ServiceKeys(o); len(keys) == 1 && keys[0] == ref.String() {
			own = append(own, o)
		}
	}
	return podstate.ObjectsReadyWhen(own, when)
}
