package weeder

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Exclusion is the one rule for which namespaces are weeded, and its reason names the
// config field that leaves a namespace out, so the warning tells an operator what to change.
func TestExclusionNamesTheFieldThatLeavesANamespaceOut(t *testing.T) {
	shoot := labels.SelectorFromSet(labels.Set{"gardener.cloud/role": "shoot"})
	for _, tc := range []struct {
		name     string
		ns       string
		names    []string
		sel      labels.Selector
		nsLabels map[string]string
		want     string // a part of the reason; "" : watched
	}{
		{name: "no namespaces section watches every namespace", ns: "app"},
		{name: "a namespace the selector matches is watched", ns: "shoot--a", sel: shoot, nsLabels: map[string]string{"gardener.cloud/role": "shoot"}},
		{name: "a namespace without the selector's label is left out by the selector", ns: "app", sel: shoot, want: "namespaces.selector gardener.cloud/role=shoot"},
		{name: "a listed name is watched", ns: "app", names: []string{"app"}},
		{name: "a name not listed is left out by the names", ns: "other", names: []string{"app"}, want: "namespaces.names does not list namespace other"},
		{name: "names and selector are AND-ed: the name alone is not enough", ns: "app", names: []string{"app"}, sel: shoot, want: "namespaces.selector"},
		{name: "names are checked before the labels", ns: "other", names: []string{"app"}, sel: shoot, nsLabels: map[string]string{"gardener.cloud/role": "shoot"}, want: "namespaces.names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := map[string]bool{}
			for _, n := range tc.names {
				names[n] = true
			}
			got := Exclusion(tc.ns, names, tc.sel, tc.nsLabels)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("left out (%q); want it watched", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("reason %q; want it to say %q", got, tc.want)
			}
		})
	}
}

// A Service that workloads depend on, in a namespace the config leaves out, is not weeded,
// but never silently: once the caches have synced the coordinator warns naming it and the
// reason, and counts it in weeder_services_excluded; relabelling the namespace into the
// selection takes it out of the count at once (its outages are weeded again), and the count
// never counts a service twice or one no workload depends on.
func TestAServiceInANamespaceTheConfigLeavesOutIsReported(t *testing.T) {
	h := newHarness(t, "namespaces: {selector: {matchLabels: {gardener.cloud/role: shoot}}}\n")
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	log.SetFormatter(&logrus.JSONFormatter{})
	h.c.log = log
	ctx := context.Background()
	for _, n := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "shoot--a", Labels: map[string]string{"gardener.cloud/role": "shoot"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
	} {
		if _, err := h.client.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.syncCaches()
	h.workload(annotated("app", "web", "postgres"), false)
	h.workload(annotated("shoot--a", "web", "postgres"), false)
	h.set(up("app", "postgres"))
	h.set(up("shoot--a", "postgres"))
	h.set(up("app", "unrelated")) // no workload names it: not followed, not reported
	excluded := func() float64 { return value(h.c.metrics.ServicesExcluded) }
	if got := excluded(); got != 0 {
		t.Fatalf("services_excluded = %v before the caches synced; want 0 (a namespace not yet listed is not left out)", got)
	}

	h.c.ReportExclusions()
	if got := excluded(); got != 1 {
		t.Errorf("services_excluded = %v; want 1 (app/postgres)", got)
	}
	out := logs.String()
	for _, want := range []string{`"namespaces":"the namespaces matching gardener.cloud/role=shoot"`, `"action":"excluded"`, `"namespace":"app"`, `"service":"postgres"`, `do not match namespaces.selector gardener.cloud/role=shoot`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"namespace":"shoot--a","reason"`) || strings.Count(out, `"action":"excluded"`) != 1 {
		t.Errorf("want one warning, for app/postgres alone:\n%s", out)
	}

	h.set(down("app", "postgres")) // another event: told once, counted once
	if got := excluded(); got != 1 || strings.Count(logs.String(), `"action":"excluded"`) != 1 {
		t.Errorf("after another event: services_excluded = %v, warnings %d; want 1 and 1", got, strings.Count(logs.String(), `"action":"excluded"`))
	}
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("a weeder was launched in the left-out namespace: %v", names(js))
	}

	app, _ := h.client.CoreV1().Namespaces().Get(ctx, "app", metav1.GetOptions{})
	app.Labels = map[string]string{"gardener.cloud/role": "shoot"}
	if err := h.c.nsInf.GetIndexer().Update(app); err != nil {
		t.Fatal(err)
	}
	h.c.onNamespace(app)
	if got := excluded(); got != 0 {
		t.Errorf("services_excluded = %v after the namespace was labelled into the selection; want 0", got)
	}
	if !strings.Contains(logs.String(), "no longer left out") {
		t.Errorf("the log does not say the service is weeded again:\n%s", logs.String())
	}

	app.Labels = nil
	_ = h.c.nsInf.GetIndexer().Update(app)
	h.c.onNamespace(app)
	h.workload(annotated("app", "web", ""), false) // no workload depends on it any more
	if got := excluded(); got != 0 {
		t.Errorf("services_excluded = %v once no workload depends on the service; want 0", got)
	}
}

// With no namespaces section nothing is left out: no start-up line, nothing counted.
func TestEveryNamespaceIsWatchedByDefaultAndNothingIsReported(t *testing.T) {
	h := newHarness(t, "watchDuration: 3m\n")
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	h.c.log = log
	h.workload(annotated("app", "web", "postgres"), false)
	h.set(up("app", "postgres"))
	h.c.ReportExclusions()
	if got := value(h.c.metrics.ServicesExcluded); got != 0 || strings.Contains(logs.String(), "watches only") {
		t.Errorf("services_excluded = %v, log:\n%s\nwant 0 and no line on left-out namespaces", got, logs.String())
	}
	h.set(down("app", "postgres"))
	if js := h.weederJobs(); len(js) != 1 {
		t.Errorf("jobs %v; want the annotated service's outage armed in a namespace without any label", names(js))
	}
}
