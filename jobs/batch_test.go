package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/apilimit"
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
	s, err := WeederBatch(WeederSpec{WatchDuration: 5 * time.Minute, Trigger: TriggerOutage, TriggerTime: at, Armed: true, Client: limits}, targets)
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
