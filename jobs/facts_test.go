package jobs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

func jobWith(annotations, labels map[string]string, env ...corev1.EnvVar) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: annotations, Labels: labels}}
	j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "weeder", Env: env}}
	return j
}

func TestFactsRoundTripThroughAJobsAnnotations(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	cases := map[string]Facts{
		"armed weeder":                          {Target: "shoot--a/etcd", Trigger: TriggerOutage, TriggerTime: at, Armed: true, ArmedAt: at},
		"unarmed weeder":                        {Target: "shoot--a/etcd", Trigger: TriggerReady, TriggerTime: at},
		"armed at the zero time is still armed": {Target: "a/b", Armed: true},
		"batch":                                 {Target: "batch-0123abcd", Targets: []string{"a/etcd", "b/etcd"}, Trigger: TriggerOutage, TriggerTime: at, Armed: true, ArmedAt: at},
		"probe shard":                           {Target: "shard-3", Namespaces: []string{"shoot--a", "shoot--b"}, Trigger: TriggerSchedule, TriggerTime: at},
		"probe shard following its membership":  {Target: "shard-3", Namespaces: []string{"shoot--a"}, Membership: "depwatch-probe-shard-3", Trigger: TriggerSchedule, TriggerTime: at},
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 300 {
		when := time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).UTC()
		f := Facts{Target: fmt.Sprintf("ns-%d/svc-%d", r.IntN(99), r.IntN(99)), TriggerTime: when,
			Trigger: []string{"", TriggerReady, TriggerCatchUp, TriggerOutage, TriggerManual, TriggerSchedule}[r.IntN(6)]}
		for j := range r.IntN(3) {
			f.Targets = append(f.Targets, fmt.Sprintf("ns-%d/svc", j))
		}
		for j := range r.IntN(3) {
			f.Namespaces = append(f.Namespaces, fmt.Sprintf("ns-%d", j))
		}
		if r.IntN(2) == 0 {
			f.Armed, f.ArmedAt = true, when
		}
		cases[fmt.Sprint("generated ", i)] = f
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ReadFacts(jobWith(f.annotations(), nil)); !reflect.DeepEqual(got, f) {
				t.Errorf("read back %+v\nwant %+v", got, f)
			}
		})
	}
}

// Build writes the Spec's facts, and the template's annotations cannot change them.
func TestBuildWritesTheSpecsFactsOverTheTemplates(t *testing.T) {
	tpl := resolved()
	tpl.Annotations = map[string]string{AnnotationArmed: "true", AnnotationTrigger: "made-up"}
	j, err := Build(tpl, weederSpec(t, "shoot--a", "etcd-main-client", t0))
	if err != nil {
		t.Fatal(err)
	}
	f := ReadFacts(j)
	if f.Armed || f.Trigger != TriggerReady || f.Target != "shoot--a/etcd-main-client" || !f.TriggerTime.Equal(t0) {
		t.Errorf("facts %+v", f)
	}
}

func TestArmedTellsHowAWeederWasLaunched(t *testing.T) {
	coordinator := map[string]string{LabelManagedBy: managedBy}
	gate := corev1.EnvVar{Name: "START_WHEN_READY", Value: "shoot--a/etcd-main-client"}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		want bool
	}{
		{"the coordinator's armed weeder", jobWith(map[string]string{AnnotationArmedAt: "2026-05-01T12:00:00Z"}, coordinator, gate), true},
		{"the coordinator's weeder of a return follows its service but is not armed", jobWith(map[string]string{AnnotationTrigger: TriggerReady}, coordinator, gate), false},
		{"the coordinator's Job without the fact: its env does not count", jobWith(nil, coordinator, gate), false},
		{"by hand, annotated armed", jobWith(map[string]string{AnnotationArmed: "true"}, nil), true},
		{"by hand, gated by START_WHEN_READY as earlier manuals said", jobWith(map[string]string{AnnotationTrigger: TriggerManual}, nil, gate), true},
		{"by hand, not gated", jobWith(map[string]string{AnnotationTrigger: TriggerManual}, nil), false},
		{"by hand, gated but said to be a return's", jobWith(map[string]string{AnnotationTrigger: TriggerCatchUp}, nil, gate), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Armed(tc.job); got != tc.want {
				t.Errorf("Armed = %v, want %v", got, tc.want)
			}
		})
	}
}

// jobs builds Jobs from an engine's env and names no variable itself: no string literal in
// its code is a variable of `depwatch reap` or `depwatch probe`.
func TestJobsNamesNoEngineVariable(t *testing.T) {
	var usage strings.Builder
	reaper.Usage(&usage)
	probe.Usage(&usage)
	names := map[string]bool{}
	for _, line := range strings.Split(usage.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == strings.ToUpper(f[0]) && strings.Trim(f[0], "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == "" && len(f[0]) > 3 {
			names[f[0]] = true
		}
	}
	if !names["START_WHEN_READY"] || !names["KUBECONFIG_SECRET_NAME"] {
		t.Fatalf("could not read the variables from Usage: %v", names)
	}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && names[v] {
					t.Errorf("%s: %q is the engine's variable; take it from the engine's JobSettings.Env", fset.Position(lit.Pos()), v)
				}
			}
			return true
		})
	}
}

// What a Job covers is read back from the facts Build wrote, whatever its labels say.
func TestCoversIsReadFromTheFactsAlone(t *testing.T) {
	cases := []struct {
		name  string
		facts Facts
		want  []string
	}{
		{"a service's weeder", Facts{Target: "a/etcd"}, []string{"a/etcd"}},
		{"a batch weeder", Facts{Target: "batch-0123abcd", Targets: []string{"a/etcd", "b/etcd"}}, []string{"a/etcd", "b/etcd"}},
		{"a probe Job for one namespace", Facts{Target: "shoot--a"}, []string{"shoot--a"}},
		{"a shard's probe Job", Facts{Target: "shard-3", Namespaces: []string{"shoot--a", "shoot--b"}}, []string{"shoot--a", "shoot--b"}},
		{"a Job that names no target", Facts{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := jobWith(tc.facts.annotations(), map[string]string{LabelNamespace: "labelled"})
			if got := ReadFacts(j).Covers(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("covers %q, want %q", got, tc.want)
			}
		})
	}
}
