package jobs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/reaper"
)

// TestBatchWeederJobNamesEveryTargetOnceAndForTheReaper: the targets the coordinator reads
// back from a batch Job (its annotation) are the ones it wrote, and the reaper's TARGETS in
// the Job's env names the same services with the same selectors.
func TestBatchWeederJobNamesEveryTargetOnceAndForTheReaper(t *testing.T) {
	at := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	targets := []WeederTarget{
		{Namespace: "shoot--a", Service: "etcd-main", Selectors: apiserverSelectors()},
		{Namespace: "shoot--b", Service: "etcd-main", Selectors: apiserverSelectors()},
		{Namespace: "shoot--b", Service: "kube-apiserver", Selectors: apiserverSelectors()},
	}
	limits := reaper.ClientLimits{API: apilimit.Limit{QPS: 6, Burst: 15}, Events: apilimit.Limit{QPS: 5, Burst: 10}}
	s, err := WeederBatch(WeederSpec{WatchDuration: 5 * time.Minute, Trigger: TriggerOutage, TriggerTime: at, Armed: true, MaxWait: DefaultArmedMaxWait, Client: limits}, targets)
	if err != nil {
		t.Fatal(err)
	}
	job, err := Build(resolved(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ReadFacts(job).Covers(), " "); got != "shoot--a/etcd-main shoot--b/etcd-main shoot--b/kube-apiserver" {
		t.Errorf("covers %q", got)
	}
	if !Armed(job) || job.Labels[LabelBatch] != "true" || job.Labels[LabelNamespace] != "" || !strings.HasPrefix(job.Name, "weeder-batch-") {
		t.Errorf("armed %v labels %v name %s", Armed(job), job.Labels, job.Name)
	}
	env := envMap(job.Spec.Template.Spec.Containers[0].Env)
	for _, name := range []string{"NAMESPACE", "LABEL_SELECTORS", "START_WHEN_READY"} {
		if v, ok := env[name]; ok {
			t.Errorf("a batch Job sets %s=%q beside TARGETS", name, v)
		}
	}
	if env["KUBE_API_QPS"] != "6" || env["KUBE_API_BURST"] != "15" || env["KUBE_API_EVENTS_QPS"] != "5" {
		t.Errorf("the batch's client limits: %v", env)
	}
	if env["MAX_WAIT"] != DefaultArmedMaxWait.String() || env["RUN_DURATION"] != "5m0s" {
		t.Errorf("shared settings: MAX_WAIT=%q RUN_DURATION=%q", env["MAX_WAIT"], env["RUN_DURATION"])
	}
	rts, err := reaper.ParseTargets(env["TARGETS"])
	if err != nil {
		t.Fatal(err)
	}
	for i, rt := range rts {
		want, _ := SelectorStrings(targets[i].Selectors)
		if rt.Namespace+"/"+rt.Service != targets[i].Key() || strings.Join(rt.Selectors, ";") != strings.Join(want, ";") {
			t.Errorf("TARGETS[%d] = %+v, want %s %v", i, rt, targets[i].Key(), want)
		}
	}

	one, _ := Weeder(WeederSpec{Namespace: "shoot--a", Service: "etcd-main", Selectors: apiserverSelectors(), WatchDuration: time.Minute, TriggerTime: at})
	single, _ := Build(resolved(), one)
	if got := ReadFacts(single).Covers(); len(got) != 1 || got[0] != "shoot--a/etcd-main" {
		t.Errorf("a single weeder Job's targets = %v", got)
	}
}

func TestBatchWeederRefusesWhatASingleJobWould(t *testing.T) {
	base := WeederSpec{WatchDuration: time.Minute}
	for name, targets := range map[string][]WeederTarget{
		"none":          nil,
		"no selector":   {{Namespace: "a", Service: "etcd"}},
		"service twice": {{Namespace: "a", Service: "etcd", Selectors: apiserverSelectors()}, {Namespace: "a", Service: "etcd", Selectors: apiserverSelectors()}},
		"no service":    {{Namespace: "a", Selectors: apiserverSelectors()}},
	} {
		if _, err := WeederBatch(base, targets); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestAWeederOfDependentsInOtherNamespacesGatesEveryNamespaceOnTheOneService: a service whose
// dependents are in its own namespace and in others (a depends-on annotation naming
// `ns/name`) gets one Job covering the service alone, a TARGETS run with one target per
// namespace of dependents, each gated on that service; in a batch its targets join the
// others'.
func TestAWeederOfDependentsInOtherNamespacesGatesEveryNamespaceOnTheOneService(t *testing.T) {
	at := time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC)
	web := []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}
	api := []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "api"}}}
	w := WeederSpec{Namespace: "data", Service: "postgres", Selectors: apiserverSelectors(),
		Elsewhere: map[string][]metav1.LabelSelector{"shop": web, "billing": api}, WatchDuration: time.Minute, TriggerTime: at}
	want := []reaper.Target{
		{Namespace: "data", Service: "postgres", Selectors: mustStrings(t, apiserverSelectors())},
		{Namespace: "data", Service: "postgres", PodNamespace: "billing", Selectors: []string{"app=api"}},
		{Namespace: "data", Service: "postgres", PodNamespace: "shop", Selectors: []string{"app=web"}},
	}
	lone, err := Weeder(w)
	if err != nil {
		t.Fatal(err)
	}
	job, err := Build(resolved(), lone)
	if err != nil {
		t.Fatal(err)
	}
	if got := ReadFacts(job).Covers(); len(got) != 1 || got[0] != "data/postgres" || job.Labels[LabelBatch] != "" {
		t.Errorf("the Job covers %v (labels %v), want data/postgres alone", got, job.Labels)
	}
	env := envMap(job.Spec.Template.Spec.Containers[0].Env)
	for _, name := range []string{"NAMESPACE", "LABEL_SELECTORS", "START_WHEN_READY"} {
		if v, ok := env[name]; ok {
			t.Errorf("the Job sets %s=%q beside TARGETS", name, v)
		}
	}
	if got, err := reaper.ParseTargets(env["TARGETS"]); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("TARGETS %+v (%v), want %+v", got, err, want)
	}

	everyEndpoint := w
	everyEndpoint.ReadyWhen = podstate.ReadyAll
	spec, err := Weeder(everyEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := envconf.LookupIn(spec.Env)("TARGETS")
	all, err := reaper.ParseTargets(v)
	if len(all) != 3 {
		t.Errorf("readyWhen all: TARGETS %s (%v), want three targets", v, err)
	}
	for _, tg := range all {
		if tg.ReadyWhen == nil || *tg.ReadyWhen != podstate.ReadyAll {
			t.Errorf("readyWhen all: target %s has readyWhen %v (%v), want every target's all", tg, tg.ReadyWhen, err)
		}
	}

	onlyElsewhere := w
	onlyElsewhere.Selectors = nil
	if _, err := Weeder(onlyElsewhere); err != nil {
		t.Errorf("dependents in other namespaces alone: %v", err)
	}
	sameNamespace := w
	sameNamespace.Elsewhere = map[string][]metav1.LabelSelector{"data": web}
	if _, err := Weeder(sameNamespace); err == nil || !strings.Contains(err.Error(), "namespace data") {
		t.Errorf("dependents in the service's own namespace given as elsewhere: %v", err)
	}

	batch, err := WeederBatch(WeederSpec{WatchDuration: time.Minute, TriggerTime: at}, []WeederTarget{
		{Namespace: "data", Service: "postgres", Selectors: w.Selectors, Elsewhere: w.Elsewhere},
		{Namespace: "shop", Service: "redis", Selectors: web},
	})
	if err != nil {
		t.Fatal(err)
	}
	job, err = Build(resolved(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ReadFacts(job).Covers(), " "); got != "data/postgres shop/redis" {
		t.Errorf("the batch covers %q", got)
	}
	got, err := reaper.ParseTargets(envMap(job.Spec.Template.Spec.Containers[0].Env)["TARGETS"])
	if wantBatch := append(want, reaper.Target{Namespace: "shop", Service: "redis", Selectors: []string{"app=web"}}); err != nil || !reflect.DeepEqual(got, wantBatch) {
		t.Errorf("batch TARGETS %+v (%v), want %+v", got, err, wantBatch)
	}
}

func mustStrings(t *testing.T, sels []metav1.LabelSelector) []string {
	t.Helper()
	out, err := SelectorStrings(sels)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
