package reaper

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

// rule is the minimal valid rule so a test can focus on one other variable.
const minimalRule = "CrashLoopBackOff"

func withRule(m map[string]string) map[string]string {
	if _, ok := m["CONTAINER_STATUSES"]; !ok {
		m["CONTAINER_STATUSES"] = minimalRule
	}
	return m
}

func TestLoadOptionsDefaults(t *testing.T) {
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": minimalRule})
	switch {
	case o.Namespace != "":
		t.Errorf("Namespace = %q, want all namespaces", o.Namespace)
	case o.ScheduleSpec != "@every 1m":
		t.Errorf("ScheduleSpec = %q, want @every 1m", o.ScheduleSpec)
	case o.RunDuration != 0:
		t.Errorf("RunDuration = %v, want 0 (forever)", o.RunDuration)
	case o.GracePeriod != nil:
		t.Errorf("GracePeriod = %v, want nil (the pod's own)", *o.GracePeriod)
	case o.MaxPods != 0, o.DryRun, o.Evict, o.Watch:
		t.Errorf("MaxPods/DryRun/Evict/Watch = %d/%v/%v/%v, want 0/false/false/false", o.MaxPods, o.DryRun, o.Evict, o.Watch)
	case o.Sorting != SortListOrder:
		t.Errorf("Sorting = %q, want the API's list order (pod-reaper's default)", o.Sorting)
	case len(o.Selectors) != 1 || !o.Selectors[0].Empty():
		t.Errorf("Selectors = %v, want one selecting every pod", o.Selectors)
	case len(o.Rules) != 1 || o.Rules[0].Name() != "CONTAINER_STATUSES":
		t.Errorf("Rules = %v", o.Rules)
	}
}

// TestLoadOptionsValidValues: every variable's accepted forms and what they turn into.
func TestLoadOptionsValidValues(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(Options) bool
	}{
		{"namespace", map[string]string{"NAMESPACE": "kube-system"}, func(o Options) bool { return o.Namespace == "kube-system" }},
		{"empty namespace means all", map[string]string{"NAMESPACE": ""}, func(o Options) bool { return o.Namespace == "" }},
		{"node name", map[string]string{"NODE_NAME": "node-1.example"}, func(o Options) bool { return o.NodeName == "node-1.example" }},
		{"grace period in whole seconds", map[string]string{"GRACE_PERIOD": "1m30s"}, func(o Options) bool { return *o.GracePeriod == 90 }},
		{"grace period rounds down", map[string]string{"GRACE_PERIOD": "1999ms"}, func(o Options) bool { return *o.GracePeriod == 1 }},
		{"grace period zero", map[string]string{"GRACE_PERIOD": "0s"}, func(o Options) bool { return *o.GracePeriod == 0 }},
		{"schedule 5 fields", map[string]string{"SCHEDULE": "*/5 * * * *"}, func(o Options) bool { return o.Schedule != nil }},
		{"schedule with seconds", map[string]string{"SCHEDULE": "*/30 * * * * *"}, func(o Options) bool { return o.Schedule != nil }},
		{"schedule descriptor", map[string]string{"SCHEDULE": "@hourly"}, func(o Options) bool { return o.Schedule != nil }},
		{"schedule every", map[string]string{"SCHEDULE": "@every 10s"}, func(o Options) bool {
			return o.Schedule.Next(t0).Sub(t0) == 10*time.Second
		}},
		{"run duration", map[string]string{"RUN_DURATION": "10m"}, func(o Options) bool { return o.RunDuration == 10*time.Minute }},
		{"empty run duration means forever", map[string]string{"RUN_DURATION": ""}, func(o Options) bool { return o.RunDuration == 0 }},
		{"evict true", map[string]string{"EVICT": "true"}, func(o Options) bool { return o.Evict }},
		{"evict T", map[string]string{"EVICT": "T"}, func(o Options) bool { return o.Evict }},
		{"evict 0", map[string]string{"EVICT": "0"}, func(o Options) bool { return !o.Evict }},
		{"dry run 1", map[string]string{"DRY_RUN": "1"}, func(o Options) bool { return o.DryRun }},
		{"dry run FALSE", map[string]string{"DRY_RUN": "FALSE"}, func(o Options) bool { return !o.DryRun }},
		{"watch True", map[string]string{"WATCH": "True"}, func(o Options) bool { return o.Watch }},
		{"max pods", map[string]string{"MAX_PODS": "3"}, func(o Options) bool { return o.MaxPods == 3 }},
		{"negative max pods means unlimited", map[string]string{"MAX_PODS": "-4"}, func(o Options) bool { return o.MaxPods == 0 }},
		{"sorting random", map[string]string{"POD_SORTING_STRATEGY": "random"}, func(o Options) bool { return o.Sorting == SortRandom }},
		{"sorting oldest-first", map[string]string{"POD_SORTING_STRATEGY": "oldest-first"}, func(o Options) bool { return o.Sorting == SortOldestFirst }},
		{"sorting youngest-first", map[string]string{"POD_SORTING_STRATEGY": "youngest-first"}, func(o Options) bool { return o.Sorting == SortYoungestFirst }},
		{"sorting pod-deletion-cost", map[string]string{"POD_SORTING_STRATEGY": "pod-deletion-cost"}, func(o Options) bool { return o.Sorting == SortPodDeletionCost }},
		{"exclude label", map[string]string{"EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "yes,true"}, func(o Options) bool {
			return o.Selectors[0].String() == "keep notin (true,yes)"
		}},
		{"require label", map[string]string{"REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": "a, b"}, func(o Options) bool {
			return o.Selectors[0].String() == "app in (a,b)"
		}},
		{"require annotation", map[string]string{"REQUIRE_ANNOTATION_KEY": "example.com/reap", "REQUIRE_ANNOTATION_VALUES": "yes"}, func(o Options) bool {
			return o.annotation.String() == "example.com/reap in (yes)"
		}},
		{"label selector ANDed with require", map[string]string{"LABEL_SELECTOR": "tier=web,!canary", "REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": "a"}, func(o Options) bool {
			return len(o.Selectors) == 1 && o.Selectors[0].String() == "app in (a),!canary,tier=web"
		}},
		{"label selectors OR-ed, each ANDed with the rest", map[string]string{"LABEL_SELECTORS": `["app=a","app in (b,c)"]`, "LABEL_SELECTOR": "tier=web"}, func(o Options) bool {
			return len(o.Selectors) == 2 && o.Selectors[0].String() == "app=a,tier=web" && o.Selectors[1].String() == "app in (b,c),tier=web"
		}},
		{"chaos chance bounds", map[string]string{"CHAOS_CHANCE": "1"}, func(o Options) bool { return len(o.Rules) == 2 }},
		{"every rule", map[string]string{"CHAOS_CHANCE": "0.5", "POD_STATUSES": "Evicted", "POD_STATUS_PHASES": "Failed,Unknown", "MAX_DURATION": "1h", "MAX_UNREADY": "10m"}, func(o Options) bool {
			return len(o.Rules) == 6 && o.Rules[len(o.Rules)-1].Name() == "CHAOS_CHANCE"
		}},
		{"phases become a field selector", map[string]string{"POD_STATUS_PHASES": "Failed", "NODE_NAME": "n1"}, func(o Options) bool {
			return o.fieldSelector() == "spec.nodeName=n1,status.phase!=Pending,status.phase!=Running,status.phase!=Succeeded,status.phase!=Unknown"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mustOptions(t, withRule(tt.env))
			if !tt.check(o) {
				t.Errorf("LoadOptions(%v) gave unexpected options: %+v", tt.env, o)
			}
		})
	}
}

// TestLoadOptionsInvalidValues: each bad value is reported naming the variable and the value.
func TestLoadOptionsInvalidValues(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"namespace", map[string]string{"NAMESPACE": "Not_A_Namespace"}, `NAMESPACE="Not_A_Namespace": not a valid namespace name`},
		{"empty node name", map[string]string{"NODE_NAME": ""}, `NODE_NAME="": must not be empty`},
		{"node name", map[string]string{"NODE_NAME": "a b"}, `NODE_NAME="a b": not a valid node name`},
		{"grace period", map[string]string{"GRACE_PERIOD": "30"}, `GRACE_PERIOD="30": must be a Go duration`},
		{"negative grace period", map[string]string{"GRACE_PERIOD": "-1s"}, `GRACE_PERIOD="-1s": must not be negative`},
		{"schedule", map[string]string{"SCHEDULE": "every minute"}, `SCHEDULE="every minute": not a valid cron schedule`},
		{"empty schedule", map[string]string{"SCHEDULE": ""}, `SCHEDULE="": not a valid cron schedule`},
		{"schedule time zone without space (robfig/cron panics)", map[string]string{"SCHEDULE": "TZ=UTC"}, `SCHEDULE="TZ=UTC": not a valid cron schedule`},
		{"schedule that never fires", map[string]string{"SCHEDULE": "0 0 30 2 *"}, `SCHEDULE="0 0 30 2 *": never fires`},
		{"run duration", map[string]string{"RUN_DURATION": "forever"}, `RUN_DURATION="forever": must be a Go duration`},
		{"negative run duration", map[string]string{"RUN_DURATION": "-5m"}, `RUN_DURATION="-5m": must not be negative`},
		{"evict yes", map[string]string{"EVICT": "yes"}, `EVICT="yes": must be one of 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False`},
		{"dry run empty", map[string]string{"DRY_RUN": ""}, `DRY_RUN="": must be one of`},
		{"dry run on", map[string]string{"DRY_RUN": "on"}, `DRY_RUN="on": must be one of`},
		{"watch", map[string]string{"WATCH": "tRuE"}, `WATCH="tRuE": must be one of`},
		{"max pods", map[string]string{"MAX_PODS": "abc"}, `MAX_PODS="abc": must be an integer`},
		{"max pods float", map[string]string{"MAX_PODS": "1.5"}, `MAX_PODS="1.5": must be an integer`},
		{"sorting empty", map[string]string{"POD_SORTING_STRATEGY": ""}, `POD_SORTING_STRATEGY="": must be one of`},
		{"sorting", map[string]string{"POD_SORTING_STRATEGY": "newest"}, `POD_SORTING_STRATEGY="newest": must be one of random, oldest-first, youngest-first, pod-deletion-cost`},
		{"exclude key alone", map[string]string{"EXCLUDE_LABEL_KEY": "keep"}, `EXCLUDE_LABEL_KEY="keep": EXCLUDE_LABEL_VALUES must be set too`},
		{"exclude values alone", map[string]string{"EXCLUDE_LABEL_VALUES": "yes"}, `EXCLUDE_LABEL_VALUES="yes": EXCLUDE_LABEL_KEY must be set too`},
		{"require key alone", map[string]string{"REQUIRE_LABEL_KEY": "app"}, `REQUIRE_LABEL_KEY="app": REQUIRE_LABEL_VALUES must be set too`},
		{"require values alone", map[string]string{"REQUIRE_LABEL_VALUES": "a"}, `REQUIRE_LABEL_VALUES="a": REQUIRE_LABEL_KEY must be set too`},
		{"annotation key alone", map[string]string{"REQUIRE_ANNOTATION_KEY": "x"}, `REQUIRE_ANNOTATION_KEY="x": REQUIRE_ANNOTATION_VALUES must be set too`},
		{"annotation values alone", map[string]string{"REQUIRE_ANNOTATION_VALUES": "x"}, `REQUIRE_ANNOTATION_VALUES="x": REQUIRE_ANNOTATION_KEY must be set too`},
		{"annotation key invalid", map[string]string{"REQUIRE_ANNOTATION_KEY": "a b", "REQUIRE_ANNOTATION_VALUES": "x"}, `REQUIRE_ANNOTATION_KEY="a b": not a valid annotation key`},
		{"label key invalid", map[string]string{"REQUIRE_LABEL_KEY": "a b", "REQUIRE_LABEL_VALUES": "x"}, `REQUIRE_LABEL_KEY="a b": with REQUIRE_LABEL_VALUES="x" is not a valid label requirement`},
		{"label value invalid", map[string]string{"EXCLUDE_LABEL_KEY": "a", "EXCLUDE_LABEL_VALUES": "x y"}, `EXCLUDE_LABEL_KEY="a": with EXCLUDE_LABEL_VALUES="x y" is not a valid label requirement`},
		{"empty key", map[string]string{"REQUIRE_LABEL_KEY": "", "REQUIRE_LABEL_VALUES": "a"}, `REQUIRE_LABEL_KEY="": must not be empty`},
		{"label selector", map[string]string{"LABEL_SELECTOR": "a in (b"}, `LABEL_SELECTOR="a in (b": not a valid label selector`},
		{"empty label selector", map[string]string{"LABEL_SELECTOR": " "}, `LABEL_SELECTOR=" ": must not be empty`},
		{"label selectors not JSON", map[string]string{"LABEL_SELECTORS": "app=a\napp=b"}, `LABEL_SELECTORS="app=a\napp=b": must be a JSON list of label selectors`},
		{"label selectors empty list", map[string]string{"LABEL_SELECTORS": "[]"}, `LABEL_SELECTORS="[]": must list at least one label selector`},
		{"label selectors null", map[string]string{"LABEL_SELECTORS": "null"}, `LABEL_SELECTORS="null": must list at least one label selector`},
		{"label selectors empty entry", map[string]string{"LABEL_SELECTORS": `["app=a",""]`}, `LABEL_SELECTORS="[\"app=a\",\"\"]": entry 1 ("") is empty and would select every pod`},
		{"label selectors blank entry", map[string]string{"LABEL_SELECTORS": `["  "]`}, `entry 0 ("  ") is empty and would select every pod`},
		{"label selectors bad entry", map[string]string{"LABEL_SELECTORS": `["a=b","c in ("]`}, `entry 1 ("c in (") is not a valid label selector`},
		{"label selectors empty string", map[string]string{"LABEL_SELECTORS": ""}, `LABEL_SELECTORS="": must be a JSON list`},
		{"no rule", map[string]string{}, "no rule is enabled: set at least one of CHAOS_CHANCE, CONTAINER_STATUSES"},
		{"chaos not a number", map[string]string{"CHAOS_CHANCE": "half"}, `CHAOS_CHANCE="half": must be a number between 0 and 1`},
		{"chaos above 1", map[string]string{"CHAOS_CHANCE": "1.01"}, `CHAOS_CHANCE="1.01": must be a number between 0 and 1`},
		{"chaos negative", map[string]string{"CHAOS_CHANCE": "-0.1"}, `CHAOS_CHANCE="-0.1": must be a number between 0 and 1`},
		{"chaos NaN", map[string]string{"CHAOS_CHANCE": "NaN"}, `CHAOS_CHANCE="NaN": must be a number between 0 and 1`},
		{"chaos Inf", map[string]string{"CHAOS_CHANCE": "+Inf"}, `CHAOS_CHANCE="+Inf": must be a number between 0 and 1`},
		{"pod statuses empty item", map[string]string{"POD_STATUSES": "Evicted,"}, `POD_STATUSES="Evicted,": has an empty item (a trailing comma, ",," or an empty value): pod-reaper reads it as "no status reason"`},
		{"pod-reaper README's phase variable name", map[string]string{"POD_PHASE_STATUSES": "Failed", "CHAOS_CHANCE": "1"}, `POD_PHASE_STATUSES="Failed": not a variable: pod-reaper's README names it, but pod-reaper reads POD_STATUS_PHASES`},
		{"phase unknown", map[string]string{"POD_STATUS_PHASES": "failed"}, `POD_STATUS_PHASES="failed": unknown phase "failed"; phases are Pending, Running, Succeeded, Failed, Unknown`},
		{"max duration", map[string]string{"MAX_DURATION": "2 days"}, `MAX_DURATION="2 days": must be a Go duration`},
		{"max duration negative", map[string]string{"MAX_DURATION": "-1h"}, `MAX_DURATION="-1h": must not be negative`},
		{"max unready", map[string]string{"MAX_UNREADY": "5"}, `MAX_UNREADY="5": must be a Go duration`},
		{"max unready negative", map[string]string{"MAX_UNREADY": "-5m"}, `MAX_UNREADY="-5m": must not be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadOptions(envOf(tt.env))
			var cfg *envconf.ConfigError
			if !errors.As(err, &cfg) {
				t.Fatalf("LoadOptions(%v) error = %v, want a *envconf.ConfigError", tt.env, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadOptions(%v) error =\n%v\nwant it to contain\n%s", tt.env, err, tt.want)
			}
		})
	}
}

// TestLoadOptionsReportsEveryProblemAtOnce: one run of LoadOptions lists all mistakes, one per
// line, so a person fixes a manifest in one go.
func TestLoadOptionsReportsEveryProblemAtOnce(t *testing.T) {
	_, err := LoadOptions(envOf(map[string]string{
		"MAX_PODS": "abc", "DRY_RUN": "yes", "SCHEDULE": "nope", "CHAOS_CHANCE": "2",
		"REQUIRE_LABEL_KEY": "app", "LABEL_SELECTORS": "[]", "MAX_DURATION": "-1s",
	}))
	var cfg *envconf.ConfigError
	if !errors.As(err, &cfg) {
		t.Fatalf("error = %v, want *envconf.ConfigError", err)
	}
	want := []string{"MAX_PODS=", "DRY_RUN=", "SCHEDULE=", "CHAOS_CHANCE=", "REQUIRE_LABEL_KEY=", "LABEL_SELECTORS=", "MAX_DURATION="}
	if len(cfg.Problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(cfg.Problems), len(want), err)
	}
	lines := strings.Split(err.Error(), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w+`"`)
		}
		if !found {
			t.Errorf("error does not report %s on its own line:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "no rule is enabled") {
		t.Errorf("a rule with a bad value must not also be reported as 'no rule is enabled':\n%v", err)
	}
}

// TestLoadOptionsReadsOnlyDocumentedSettings: every variable LoadOptions reads is in the Usage
// table, and every table entry is read, so help and parser cannot drift apart.
func TestLoadOptionsReadsOnlyDocumentedSettings(t *testing.T) {
	read := map[string]bool{}
	_, _ = LoadOptions(func(k string) (string, bool) { read[k] = true; return "", false })
	documented := map[string]bool{}
	for _, s := range settings {
		documented[s.Name] = true
		if !read[s.Name] {
			t.Errorf("setting %s is documented but never read", s.Name)
		}
	}
	for k := range read {
		if !documented[k] {
			t.Errorf("LoadOptions reads %s, which Usage does not document", k)
		}
	}
}

func TestUsageListsEverySettingWithDefault(t *testing.T) {
	var b bytes.Buffer
	Usage(&b)
	out := b.String()
	for _, s := range settings {
		if !strings.Contains(out, s.Name) {
			t.Errorf("Usage does not list %s", s.Name)
		}
	}
	for _, def := range []string{"@every 1m", "0s", "false"} {
		if !strings.Contains(out, def) {
			t.Errorf("Usage does not show default %q", def)
		}
	}
}

func TestLoadOptionsGate(t *testing.T) {
	rule := map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range rule {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	o := mustOptions(t, with("START_WHEN_READY", "etcd-main-client", "NAMESPACE", "shoot--a"))
	if o.StartWhenReady == nil || *o.StartWhenReady != (ServiceRef{"shoot--a", "etcd-main-client"}) || o.MaxWait != 6*time.Hour {
		t.Errorf("in NAMESPACE: %+v %s", o.StartWhenReady, o.MaxWait)
	}
	o = mustOptions(t, with("START_WHEN_READY", "garden/etcd", "NAMESPACE", "shoot--a", "MAX_WAIT", "10m"))
	if *o.StartWhenReady != (ServiceRef{"garden", "etcd"}) || o.MaxWait != 10*time.Minute {
		t.Errorf("qualified: %+v %s", o.StartWhenReady, o.MaxWait)
	}
	if o := mustOptions(t, rule); o.StartWhenReady != nil {
		t.Errorf("no gate: %+v", o.StartWhenReady)
	}
	bad := []struct {
		env  map[string]string
		want string
	}{
		{with("START_WHEN_READY", "etcd"), `START_WHEN_READY="etcd": names no namespace and NAMESPACE is not set`},
		{with("START_WHEN_READY", ""), `START_WHEN_READY="": must not be empty`},
		{with("START_WHEN_READY", "a/b/c"), `START_WHEN_READY="a/b/c": must be <service> or <namespace>/<service>`},
		{with("START_WHEN_READY", "Bad_NS/etcd"), `namespace "Bad_NS" is not a valid namespace name`},
		{with("START_WHEN_READY", "ns/9etcd"), `service "9etcd" is not a valid service name`},
		{with("START_WHEN_READY", "ns/etcd", "MAX_WAIT", "0s"), `MAX_WAIT="0s": must be positive`},
		{with("START_WHEN_READY", "ns/etcd", "MAX_WAIT", "-1m"), `MAX_WAIT="-1m": must not be negative`},
		{with("START_WHEN_READY", "ns/etcd", "MAX_WAIT", "soon"), `MAX_WAIT="soon": must be a Go duration`},
		{with("MAX_WAIT", "1h"), `MAX_WAIT="1h": only means something with START_WHEN_READY`},
	}
	for _, tc := range bad {
		_, err := LoadOptions(envOf(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadOptions(%v) = %v, want %q", tc.env, err, tc.want)
		}
	}
}
