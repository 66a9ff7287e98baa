package reaper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/depwatch/depwatch/internal/envconf"
	"k8s.io/client-go/kubernetes/fake"
)

// loadThenRun does what `depwatch reap` does: load the environment and run only when it is
// valid. It returns the load error; the caller checks that the cluster was not touched.
func loadThenRun(t *testing.T, client *fake.Clientset, env map[string]string) error {
	t.Helper()
	o, err := LoadOptions(envOf(env))
	if err != nil {
		return err
	}
	o.RunDuration = 1 // one cycle, at start
	o.ReapAtStart = true
	log, _ := quietLogger()
	_, runErr := Run(context.Background(), client, o, log)
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	return nil
}

// Every hostile value is refused naming its variable and value, and nothing is listed or
// deleted: a crash-looping pod in kube-system, which any "match everything" slip would reap,
// survives every case.
func TestHostileEnvironmentIsRefusedAndNoPodIsTouched(t *testing.T) {
	base := map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "NAMESPACE": "kube-system"}
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		// An empty selector never means "all pods": "all pods" is no label variable set at all
		// (pod-reaper's contract); a variable that is set must select something.
		{"LABEL_SELECTOR empty", map[string]string{"LABEL_SELECTOR": ""}, `LABEL_SELECTOR="": must not be empty`},
		{"LABEL_SELECTOR blank", map[string]string{"LABEL_SELECTOR": " \t"}, `LABEL_SELECTOR=" \t": must not be empty`},
		{"LABEL_SELECTOR only a comma", map[string]string{"LABEL_SELECTOR": ","}, `LABEL_SELECTOR=",": not a valid label selector`},
		{"LABEL_SELECTORS empty", map[string]string{"LABEL_SELECTORS": ""}, `LABEL_SELECTORS="": must be a JSON list`},
		{"LABEL_SELECTORS empty list", map[string]string{"LABEL_SELECTORS": "[]"}, `LABEL_SELECTORS="[]": must list at least one label selector`},
		{"LABEL_SELECTORS null", map[string]string{"LABEL_SELECTORS": "null"}, `LABEL_SELECTORS="null": must list at least one label selector`},
		{"LABEL_SELECTORS empty entry", map[string]string{"LABEL_SELECTORS": `["app=a",""]`}, `entry 1 ("") is empty and would select every pod`},
		{"LABEL_SELECTORS a string", map[string]string{"LABEL_SELECTORS": `"app=a"`}, `LABEL_SELECTORS="\"app=a\"": must be a JSON list`},
		{"REQUIRE_LABEL_KEY empty", map[string]string{"REQUIRE_LABEL_KEY": "", "REQUIRE_LABEL_VALUES": "a"}, `REQUIRE_LABEL_KEY="": must not be empty`},
		{"REQUIRE_LABEL_KEY without values", map[string]string{"REQUIRE_LABEL_KEY": "app"}, `REQUIRE_LABEL_KEY="app": REQUIRE_LABEL_VALUES must be set too`},
		// Durations and fractions.
		{"negative GRACE_PERIOD", map[string]string{"GRACE_PERIOD": "-1s"}, `GRACE_PERIOD="-1s": must not be negative`},
		{"negative RUN_DURATION", map[string]string{"RUN_DURATION": "-1m"}, `RUN_DURATION="-1m": must not be negative`},
		{"negative MAX_DURATION", map[string]string{"MAX_DURATION": "-1h"}, `MAX_DURATION="-1h": must not be negative`},
		{"negative MAX_UNREADY", map[string]string{"MAX_UNREADY": "-1h"}, `MAX_UNREADY="-1h": must not be negative`},
		{"zero MAX_WAIT", map[string]string{"START_WHEN_READY": "kube-dns", "MAX_WAIT": "0s"}, `MAX_WAIT="0s": must be positive`},
		{"negative MAX_WAIT", map[string]string{"START_WHEN_READY": "kube-dns", "MAX_WAIT": "-1h"}, `MAX_WAIT="-1h": must not be negative`},
		{"CHAOS_CHANCE NaN", map[string]string{"CHAOS_CHANCE": "NaN"}, `CHAOS_CHANCE="NaN": must be a number between 0 and 1`},
		{"CHAOS_CHANCE +Inf", map[string]string{"CHAOS_CHANCE": "+Inf"}, `CHAOS_CHANCE="+Inf": must be a number between 0 and 1`},
		{"CHAOS_CHANCE -Inf", map[string]string{"CHAOS_CHANCE": "-Inf"}, `CHAOS_CHANCE="-Inf": must be a number between 0 and 1`},
		{"CHAOS_CHANCE above 1", map[string]string{"CHAOS_CHANCE": "1.5"}, `CHAOS_CHANCE="1.5": must be a number between 0 and 1`},
		{"CHAOS_CHANCE negative", map[string]string{"CHAOS_CHANCE": "-0.5"}, `CHAOS_CHANCE="-0.5": must be a number between 0 and 1`},
		{"DRY_RUN yes", map[string]string{"DRY_RUN": "yes"}, `DRY_RUN="yes": must be one of`},
		// pod-reaper reads an empty POD_STATUSES item as "no status reason": almost every pod.
		{"POD_STATUSES trailing comma", map[string]string{"POD_STATUSES": "Evicted,"}, `POD_STATUSES="Evicted,": has an empty item`},
		{"POD_STATUSES empty", map[string]string{"POD_STATUSES": ""}, `POD_STATUSES="": has an empty item`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			client := fake.NewClientset(podObjects(newPod("kube-system", "coredns-1", withLabel("app", "a"), crashLooping))...)
			err := loadThenRun(t, client, env)
			var ce *envconf.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant a *envconf.ConfigError containing %s", err, tc.want)
			}
			for _, p := range ce.Problems {
				if strings.Contains(p, "\n") {
					t.Errorf("problem spans lines: %q", p)
				}
			}
			if n := len(client.Actions()); n != 0 {
				t.Errorf("the API was called %d times on a refused configuration: %v", n, client.Actions())
			}
			if !podExists(t, client, "kube-system", "coredns-1") {
				t.Error("the pod was deleted")
			}
		})
	}
}

// The contrast: with no label variable at all, the run reaps every matching pod of
// NAMESPACE - the documented, explicit "all pods" of pod-reaper's contract.
func TestNoLabelVariableAtAllIsTheExplicitAllPods(t *testing.T) {
	client := fake.NewClientset(podObjects(newPod("kube-system", "coredns-1", crashLooping))...)
	if err := loadThenRun(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "NAMESPACE": "kube-system"}); err != nil {
		t.Fatal(err)
	}
	if podExists(t, client, "kube-system", "coredns-1") {
		t.Error("the crash-looping pod was not reaped")
	}
}

// TestEmptyLabelValuesNeverMeanEveryPod: pod-reaper accepts an empty or comma-only
// REQUIRE_LABEL_VALUES / REQUIRE_ANNOTATION_VALUES and so does depwatch, with pod-reaper's
// meaning: the label (annotation) set to the empty value. The crash-looping pod labelled app=a
// that a "match everything" reading would reap survives, and a warning says what was read.
func TestEmptyLabelValuesNeverMeanEveryPod(t *testing.T) {
	base := map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "NAMESPACE": "kube-system"}
	cases := []map[string]string{
		{"REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": ""},
		{"REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": ",,"},
		{"REQUIRE_ANNOTATION_KEY": "a", "REQUIRE_ANNOTATION_VALUES": ""},
	}
	for _, env := range cases {
		t.Run(fmt.Sprint(env), func(t *testing.T) {
			for k, v := range base {
				env[k] = v
			}
			o, err := LoadOptions(envOf(env))
			if err != nil {
				t.Fatalf("LoadOptions: %v", err)
			}
			if len(o.Warnings) == 0 || !strings.Contains(strings.Join(o.Warnings, "\n"), "empty value") {
				t.Errorf("warnings %q do not say the empty value was read", o.Warnings)
			}
			client := fake.NewClientset(podObjects(newPod("kube-system", "coredns-1", withLabel("app", "a"), crashLooping))...)
			if err := loadThenRun(t, client, env); err != nil {
				t.Fatal(err)
			}
			if !podExists(t, client, "kube-system", "coredns-1") {
				t.Error("an empty value list reaped a pod whose label has a value")
			}
		})
	}
}
