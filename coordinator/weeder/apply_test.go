package weeder

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
)

// A reload hands the weeder a new section (Apply): these prove the weeder's side of it. The
// file watching, the checks and what needs a restart are the coordinator's, tested there.

// apply makes cfgYAML the running section, as a reload does.
func (h *harness) apply(cfgYAML string, servicesChanged bool) {
	h.t.Helper()
	h.c.Apply(parseConfig(h.t, cfgYAML), h.c.config().tpl, servicesChanged)
}

func TestReloadedConfigDrivesTheWeederDecisions(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(up("n", "etcd-main-client"))
	h.set(down("n", "etcd-main-client"))
	if js := h.weederJobs(); len(js) != 1 || !jobs.Armed(&js[0]) {
		t.Fatalf("with arming on (start config) the outage should arm a weeder: %v", names(js))
	}
	for _, j := range h.weederJobs() { // as if it had ended
		_ = h.client.BatchV1().Jobs("depwatch").Delete(context.Background(), j.Name, metav1.DeleteOptions{})
	}

	h.apply(strings.Replace(testConfig, "watchDuration: 3m", "watchDuration: 7m", 1)+"armWeeder: false\n", false)
	h.set(up("n", "etcd-main-client"))
	js := h.weederJobs()
	if len(js) != 1 || jobs.Armed(&js[0]) || jobEnv(js[0])["RUN_DURATION"] != "7m0s" {
		t.Fatalf("the return after the reload: jobs %v, want one unarmed with RUN_DURATION=7m0s (env %v)", names(js), jobEnv(js[0]))
	}
	h.set(down("n", "etcd-main-client"))
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("with arming off (reloaded) the outage should stop the weeder and arm none: %v", names(js))
	}
}

func TestServiceRemovedByAReloadIsForgottenWithoutActing(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(up("n", "kube-apiserver"))
	_ = h.events()
	jobsBefore := len(h.weederJobs())
	h.apply("watchDuration: 3m\nservicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{matchLabels: {a: b}}]}}\n", true)
	h.drain()
	if got := value(h.c.metrics.ServicesReady); got != 0 {
		t.Errorf("services ready after the service was removed = %v, want 0", got)
	}
	if len(h.weederJobs()) != jobsBefore || len(h.events()) != 0 {
		t.Errorf("removing a service from the config acted on it: jobs %d→%d, events %q", jobsBefore, len(h.weederJobs()), h.events())
	}
	h.set(down("n", "kube-apiserver"))
	h.set(up("n", "kube-apiserver"))
	if len(h.weederJobs()) != jobsBefore {
		t.Error("a removed service still launches weeders")
	}
}
