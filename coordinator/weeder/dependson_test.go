package weeder

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
)

func TestParseDependsOn(t *testing.T) {
	cases := []struct {
		name, value string
		want        []string
		bad         []string // the entries named by the field errors
	}{
		{"two in the namespace", "postgres, redis", []string{"app/postgres", "app/redis"}, nil},
		{"another namespace", "other/db", []string{"other/db"}, nil},
		{"both, spaces everywhere", "  other/db ,postgres ", []string{"app/postgres", "other/db"}, nil},
		{"empty", "", nil, nil},
		{"blank", "   ", nil, nil},
		{"duplicates count once", "redis, redis, app/redis", []string{"app/redis"}, nil},
		{"an upper-case name", "Postgres", nil, []string{"Postgres"}},
		{"a name with a dot", "db.example", nil, []string{"db.example"}},
		{"a bad namespace", "Other/db", nil, []string{"Other/db"}},
		{"two slashes", "a/b/c", nil, []string{"a/b/c"}},
		{"an empty entry", "postgres,,redis", nil, []string{""}},
		{"a trailing comma", "postgres,", nil, []string{""}},
		{"one good, one bad: the bad is named", "postgres, 9lives", nil, []string{"9lives"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseDependsOn("app", tc.value)
			var bad []string
			for _, e := range errs {
				if e.Type != field.ErrorTypeInvalid || e.Field != "metadata.annotations[depwatch.io/depends-on]" {
					t.Errorf("error %v: want an invalid value of the annotation", e)
				}
				bad = append(bad, strings.TrimSpace(e.BadValue.(string)))
			}
			if !reflect.DeepEqual(bad, tc.bad) {
				t.Errorf("bad entries %q, want %q (%v)", bad, tc.bad, errs)
			}
			if tc.bad == nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("services %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeclaredByRefusesAWorkloadWithoutASelector(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, tc := range []struct {
		name     string
		value    string
		selector *metav1.LabelSelector
		want     []string
		problem  string
	}{
		{"a selector", "db", sel, []string{"app/db"}, ""},
		{"no selector", "db", nil, nil, "spec.selector"},
		{"an empty selector", "db", &metav1.LabelSelector{}, nil, "every pod"},
		{"an empty annotation needs no selector", "", nil, nil, ""},
		{"a bad entry", "DB", sel, nil, `"DB": not a service name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := DeclaredBy("Deployment", "app", tc.value, tc.selector)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("services %q, want %q", got, tc.want)
			}
			msg := ""
			if len(errs) > 0 {
				msg = errs.ToAggregate().Error() + " / " + DependsOnProblem(errs)
			}
			if (tc.problem == "") != (msg == "") || !strings.Contains(msg, tc.problem) {
				t.Errorf("problem %q, want one naming %q", msg, tc.problem)
			}
		})
	}
}

// TestAServiceIsFollowedWhileAWorkloadNamesIt: the workloads' cache says which services are
// followed and their dependents' selectors, ordered by workload, another namespace's apart.
func TestAServiceIsFollowedWhileAWorkloadNamesIt(t *testing.T) {
	h := newHarness(t, "watchDuration: 3m\n")
	h.workload(annotated("app", "web", "db"), false)
	h.workload(annotated("app", "api", "db, other/cache"), false)
	if sels := h.c.target("app/db"); len(sels.Selectors) != 2 || sels.Selectors[0].MatchLabels["app"] != "api" || len(sels.Elsewhere) != 0 {
		t.Errorf("app/db's selectors %+v, want api's then web's, all in app", sels)
	}
	// api in app depends on other/cache: its pods are the service's dependents in app.
	if sels := h.c.target("other/cache"); len(sels.Selectors) != 0 || len(sels.Elsewhere) != 1 || len(sels.Elsewhere["app"]) != 1 ||
		sels.Elsewhere["app"][0].MatchLabels["app"] != "api" {
		t.Errorf("other/cache's selectors %+v, want api's, in namespace app", sels)
	}
	h.workload(annotated("app", "web", ""), false)
	if !h.c.follows("app/db") || !h.c.follows("other/cache") {
		t.Error("app/db or other/cache unfollowed while api still names it")
	}
	h.workload(annotated("app", "api", ""), true)
	if h.c.follows("app/db") || h.c.follows("other/cache") || len(h.c.dependsOn.watches) != 0 {
		t.Errorf("still followed: %v", h.c.dependsOn.followed)
	}
}

// workload puts a Deployment into the workloads' cache (deleted: takes it out) and delivers
// the event as the informer would.
func (h *harness) workload(d *appsv1.Deployment, deleted bool) {
	h.t.Helper()
	store := h.c.dependsOn.workloads[0].GetIndexer()
	obj, _ := slimWorkload(d)
	old, _, _ := store.Get(obj)
	if deleted { // the informer tells the last state it held
		_ = store.Delete(obj)
		h.c.onWorkload(old, nil)
		return
	}
	if err := store.Update(obj); err != nil {
		h.t.Fatal(err)
	}
	h.c.onWorkload(old, obj)
}

func annotated(ns, name, value string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	if value != "" {
		d.Annotations = map[string]string{AnnotationDependsOn: value, "other": "dropped"}
	}
	return d
}

// TestAnAnnotatedWorkloadIsWeededLikeAConfiguredOne: a Service only an annotation names gets
// an armed weeder on its outage that restarts the workload's pods; without the annotation,
// its next outage arms nothing; a malformed annotation gets one Event and nothing else. The
// same with a config that names no service at all (a cluster that declares every dependency
// on its workloads).
func TestAnAnnotatedWorkloadIsWeededLikeAConfiguredOne(t *testing.T) {
	for _, tc := range []struct{ name, config string }{
		{"beside configured services", testConfig},
		{"with no service in the config", "watchDuration: 3m\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { annotatedWorkloadIsWeeded(t, tc.config) })
	}
}

func annotatedWorkloadIsWeeded(t *testing.T, config string) {
	h := newHarness(t, config)
	slim, _ := slimWorkload(annotated("app", "web", "postgres"))
	if d, ok := slim.(*cachedWorkload); !ok || len(d.Annotations) != 1 || d.selector == nil || d.kind != "Deployment" {
		t.Fatalf("slim workload %+v", slim)
	}
	if c := slim.(*cachedWorkload).DeepCopyObject(); !reflect.DeepEqual(c, slim) {
		t.Fatalf("a cached workload's deep copy %+v differs from it", c)
	}
	h.workload(annotated("app", "web", "postgres"), false)
	h.set(up("app", "postgres"))
	h.now = h.now.Add(time.Minute)
	h.set(down("app", "postgres"))
	js := h.weederJobs()
	if len(js) != 1 || !jobs.Armed(&js[0]) || !strings.Contains(jobEnv(js[0])["LABEL_SELECTORS"], "app=web") {
		t.Fatalf("jobs %v (%v), want one armed for app=web", names(js), js)
	}
	if countWith(h.events(), EventWeederArmed) != 1 {
		t.Error("no WeederArmed Event on the Service")
	}
	h.set(up("app", "postgres"))
	h.workload(annotated("app", "web", ""), false)
	if h.c.follows("app/postgres") {
		t.Fatal("still followed without its annotation")
	}
	_ = h.client.BatchV1().Jobs("depwatch").Delete(context.Background(), js[0].Name, metav1.DeleteOptions{})
	h.set(down("app", "postgres"))
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("jobs %v after the annotation was removed", names(js))
	}
	bad := annotated("app", "web", "postgres, Redis")
	h.workload(bad, false)
	h.workload(bad, false) // a status update: told once
	evs := h.events()
	if countWith(evs, EventInvalidDependsOn) != 1 || !strings.Contains(strings.Join(evs, "\n"), `"Redis"`) {
		t.Errorf("events %q, want one InvalidDependsOn naming \"Redis\"", evs)
	}
	if h.c.follows("app/postgres") {
		t.Error("a malformed annotation is followed in part")
	}
}

// TestAnnotatedNamesShareOneWatchWhileNamed: the first workload naming "db" starts the
// EndpointSlice watch of that name; a second namespace's "db" reads what the running watch
// holds at once (a Ready service first seen: a catch-up check is queued); the watch stops
// with the last workload naming it. A configured name gets no watch of its own.
func TestAnnotatedNamesShareOneWatchWhileNamed(t *testing.T) {
	h := newHarness(t, testConfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.c.StartDependsOn(ctx)
	d := h.c.dependsOn
	h.workload(annotated("a", "web", "db, etcd-main-client"), false)
	d.mu.Lock()
	w, running := d.watches["db"]
	_, configured := d.watches["etcd-main-client"]
	d.mu.Unlock()
	if !running || configured || w.stop == nil {
		t.Fatalf("watches %v: want one for db only, running", d.watches)
	}
	inf := w.inf
	// The watch's informer runs: its first list (empty, from the fake API) replaces its store,
	// so the slice goes in after that, or the list would drop it.
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the db watch never synced")
	}
	if err := inf.GetIndexer().Add(up("b", "db")); err != nil {
		t.Fatal(err)
	}
	h.workload(annotated("b", "api", "db"), false)
	h.c.mu.Lock()
	st, ok := h.c.services["b/db"]
	h.c.mu.Unlock()
	if !ok || !st.seen.Ready || st.owed == nil || !st.owed.catchUp || h.c.queue.Len() != 1 {
		t.Fatalf("b/db not read from the running watch: state %+v, queue %d", st, h.c.queue.Len())
	}
	h.workload(annotated("a", "web", ""), false)
	if d.watches["db"] == nil {
		t.Fatal("the watch stopped while b/db is still named")
	}
	h.workload(annotated("b", "api", ""), true)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.watches) != 0 {
		t.Errorf("watches left: %v", d.watches)
	}
	if _, ok := h.c.services["b/db"]; ok {
		t.Error("b/db's state outlived its last dependent")
	}
}

// TestAWorkloadDependingOnAnotherNamespacesServiceIsRestartedForIt: web in shop declares
// data/postgres; postgres's outage arms a weeder whose one target runs in shop, gated on
// data/postgres. A service with dependents in both namespaces has a target for each.
func TestAWorkloadDependingOnAnotherNamespacesServiceIsRestartedForIt(t *testing.T) {
	h := newHarness(t, "watchDuration: 3m\n")
	h.workload(annotated("shop", "web", "data/postgres"), false)
	h.set(up("data", "postgres"))
	h.now = h.now.Add(time.Minute)
	h.set(down("data", "postgres"))
	js := h.weederJobs()
	if len(js) != 1 || !jobs.Armed(&js[0]) {
		t.Fatalf("jobs %v, want one armed", names(js))
	}
	if got := jobs.ReadFacts(&js[0]).Covers(); len(got) != 1 || got[0] != "data/postgres" {
		t.Errorf("the Job covers %v, want data/postgres", got)
	}
	env := jobEnv(js[0])
	want := []reaper.Target{{Namespace: "data", Service: "postgres", PodNamespace: "shop", Selectors: []string{"app=web"}}}
	if got, err := reaper.ParseTargets(env["TARGETS"]); err != nil || !reflect.DeepEqual(got, want) || env["NAMESPACE"] != "" {
		t.Fatalf("TARGETS %+v (%v), NAMESPACE %q; want %+v", got, err, env["NAMESPACE"], want)
	}

	h.workload(annotated("data", "reports", "postgres"), false)
	_ = h.client.BatchV1().Jobs("depwatch").Delete(context.Background(), js[0].Name, metav1.DeleteOptions{})
	h.set(up("data", "postgres"))
	h.now = h.now.Add(time.Minute)
	h.set(down("data", "postgres"))
	js = h.weederJobs()
	if len(js) != 1 {
		t.Fatalf("jobs %v after the second outage, want one", names(js))
	}
	want = append([]reaper.Target{{Namespace: "data", Service: "postgres", Selectors: []string{"app=reports"}}}, want...)
	if got, err := reaper.ParseTargets(jobEnv(js[0])["TARGETS"]); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("TARGETS %+v (%v), want %+v", got, err, want)
	}
}
