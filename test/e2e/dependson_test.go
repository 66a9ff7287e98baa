//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/depwatch/depwatch/coordinator/weeder"
)

// The depends-on annotation: a dependent Deployment names its upstream Service itself, and
// the lab's coordinator (whose config names only "upstream" and Gardener's services) weeds it
// like a configured one; without the annotation it is left alone.

// dependsOnService is the annotated upstream's name: one no config names.
const dependsOnService = "db"

// startAnnotatedDependent runs the pair's dependent (app=dependent, without the label the
// config's selectors match) with only the annotation naming the pair's Service.
func (p *pair) startAnnotatedDependent(value string) {
	p.t.Helper()
	dep := hostNetworkDeployment(dependentName, p.ns, 1, nil, []string{"/testapp", "depend", p.addr}, p.addr)
	dep.Annotations = map[string]string{weeder.AnnotationDependsOn: value}
	if _, err := kube.AppsV1().Deployments(p.ns).Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		p.t.Fatalf("creating deployment %s/%s: %v", p.ns, dependentName, err)
	}
}

// waitCoordinatorLine waits until a lab coordinator's log has a line with the given fields.
func waitCoordinatorLine(t *testing.T, want map[string]string, timeout time.Duration) {
	t.Helper()
	waitCoordinatorLineIn(t, depwatchNS, want, timeout)
}

// waitCoordinatorLineIn waits until the log of a coordinator in namespace ns (the lab's, a
// Helm release's) has a line with the given fields.
func waitCoordinatorLineIn(t *testing.T, ns string, want map[string]string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("a coordinator log line in %s with %v", ns, want), func() (bool, error) {
		out, err := runKubectl("-n", ns, "logs", "-l", "app.kubernetes.io/component=coordinator", "--tail=-1")
		if err != nil {
			return false, nil // a replica restarting; look again
		}
		_, ok := findLine(parseLogLines(out), want)
		return ok, nil
	})
}

// TestDependsOnAnnotationWeedsTheDependentWithoutAConfigEntry: an upstream Service "db" and a
// dependent Deployment carrying only `depwatch.io/depends-on: db`, and a second one in another
// namespace declaring `<namespace>/db`. The outage arms one weeder, and at the return it (not
// the kubelet) restarts both crash-looping dependents, each in its own namespace. Once the
// annotation is removed, the next outage arms nothing and the dependent is left to the
// kubelet. A bystander's malformed annotation (which names "db" too) yields its
// InvalidDependsOn Event and nothing else: had it been followed in part, the second outage
// would have armed a weeder.
func TestDependsOnAnnotationWeedsTheDependentWithoutAConfigEntry(t *testing.T) {
	parallelLong(t, 3*time.Minute)
	ensureCoordinator(t)
	ns := newNamespace(t, "dependson")
	p := startPair(t, ns, dependsOnService)
	p.waitServiceReady(true, time.Minute)
	p.startAnnotatedDependent(dependsOnService)
	// The same upstream's dependent in another namespace (hostNetwork: it reaches the upstream
	// at the same address).
	q := &pair{t: t, ns: newNamespace(t, "dependson-x"), svc: dependsOnService, addr: p.addr, upstreamNS: ns}
	q.startAnnotatedDependent(p.serviceKey())
	p.waitDependentReady(time.Minute, "")
	q.waitDependentReady(time.Minute, "")

	bystander := hostNetworkDeployment("bystander", ns, 0, nil, []string{"/testapp", "serve", "127.0.0.1:1"}, "127.0.0.1:1")
	bystander.Annotations = map[string]string{weeder.AnnotationDependsOn: dependsOnService + ", Not_A_Service"}
	if _, err := kube.AppsV1().Deployments(ns).Create(context.Background(), bystander, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/bystander: %v", ns, err)
	}
	waitFor(t, time.Minute, "an InvalidDependsOn Event on deployment "+ns+"/bystander", func() (bool, error) {
		evs := eventsFor(t, ns, "bystander")[weeder.EventInvalidDependsOn]
		return len(evs) > 0 && strings.Contains(evs[0].Message, `"Not_A_Service"`) && evs[0].InvolvedObject.Kind == "Deployment", nil
	})
	// The coordinator has read the dependent's annotation before the outage begins.
	for _, d := range []*pair{p, q} {
		waitCoordinatorLine(t, map[string]string{"namespace": d.ns, "workload": "deployment " + d.ns + "/" + dependentName,
			"msg": "A workload declares the Services its pods depend on: they are weeded when those come back."}, time.Minute)
	}

	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	job := p.waitArmedJob(outageStart, time.Minute)
	t.Logf("armed weeder Job %s is waiting for %s/%s", job.Name, ns, dependsOnService)
	cls := waitForBackOffAtLeast(t, 30*time.Second, 3*time.Minute, p.dependent(), q.dependent())
	cl := cls[0]
	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	ready, took := p.restartedByWeeder(cl)
	t.Logf("upstream Ready → dependent %s Ready: %s (weeded by its annotation)", ready.Name, took)
	ready, took = q.restartedByWeeder(cls[1])
	t.Logf("upstream Ready → dependent %s/%s in another namespace Ready: %s (weeded by its annotation)", q.ns, ready.Name, took)
	if n := len(eventsFor(t, ns, dependsOnService)["WeederArmed"]); n != 1 {
		t.Errorf("%d WeederArmed Events on service %s/%s, want 1", n, ns, dependsOnService)
	}
	_, _ = waitJobLogLine(t, depwatchNS, job.Name, map[string]string{"namespace": ns, "pod": cl.pod.Name, "action": "deleted"}, time.Minute)
	_, _ = waitJobLogLine(t, depwatchNS, job.Name, map[string]string{"namespace": q.ns, "pod": cls[1].pod.Name, "action": "deleted",
		"target": p.serviceKey() + " (dependents in " + q.ns + ")"}, time.Minute)

	removeDependsOn(t, ns, dependentName)
	removeDependsOn(t, q.ns, dependentName)
	// The line names the workload whose change dropped the service's last dependent: either.
	waitCoordinatorLine(t, map[string]string{"service": p.serviceKey(),
		"msg": "No workload depends on the service any more: it is no longer followed."}, time.Minute)
	// The first outage's Job keeps its selectors to its end, and its window starts afresh at
	// every return: left running it would rightly reap at the next one. The question here is
	// whether the coordinator launches anything once the annotation is gone.
	mustKubectl(t, "-n", depwatchNS, "delete", "job", job.Name, "--cascade=foreground", "--wait=true", "--timeout=3m")
	secondOutage := time.Now()
	p.scaleUpstream(0)
	p.waitServiceReady(false, time.Minute)
	cl2 := p.waitCrashLoop(0, 3*time.Minute)
	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	p.waitDependentReady(minWait, "") // the kubelet's restart, in its own time
	time.Sleep(2 * time.Second)       // room for a (wrong) late launch
	if js := jobsCreatedAfter(p.weederJobs(), secondOutage); len(js) != 0 {
		t.Errorf("weeder Jobs for %s/%s after its annotation was removed: %v", ns, dependsOnService, jobNames(js))
	}
	for _, ev := range eventsFor(t, ns, cl2.pod.Name)["Reaped"] {
		if ev.Source.Component == reaperComponent {
			t.Errorf("pod %s/%s was reaped after its Deployment's annotation was removed: %s", ns, cl2.pod.Name, ev.Message)
		}
	}
	if n := len(eventsFor(t, ns, dependsOnService)["WeederArmed"]); n != 1 {
		t.Errorf("%d WeederArmed Events on service %s/%s, want only the first outage's", n, ns, dependsOnService)
	}
}

// removeDependsOn removes the annotation from a Deployment.
func removeDependsOn(t *testing.T, ns, name string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, weeder.AnnotationDependsOn)
	if _, err := kube.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("removing the annotation of deployment %s/%s: %v", ns, name, err)
	}
}
