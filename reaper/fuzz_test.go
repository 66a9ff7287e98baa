package reaper

import (
	"errors"
	"strings"
	"testing"

	"github.com/depwatch/depwatch/internal/envconf"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzLoadOptions: any environment, however broken, gives options or a *envconf.ConfigError
// whose every line names a variable - never a panic, never options without a rule.
func FuzzLoadOptions(f *testing.F) {
	for _, seed := range []string{
		"CONTAINER_STATUSES=CrashLoopBackOff",
		"CHAOS_CHANCE=NaN\nMAX_PODS=abc\nSCHEDULE=TZ=UTC",
		"SCHEDULE=CRON_TZ=Europe/Berlin 0 * * * *\nMAX_DURATION=1h",
		"LABEL_SELECTORS=[\"a=b\",\"\"]\nPOD_STATUS_PHASES=Failed",
		"EXCLUDE_LABEL_KEY=a\nREQUIRE_ANNOTATION_VALUES=,\nGRACE_PERIOD=-1s\nRUN_DURATION=",
		"LABEL_SELECTOR=a in (b),!c\nNODE_NAME=n1\nMAX_UNREADY=5m\nDRY_RUN=T\nPOD_SORTING_STRATEGY=oldest-first",
		`CONTAINER_STATUSES=CrashLoopBackOff` + "\n" + `TARGETS=[{"namespace":"a","service":"etcd","selectors":["x=y"]}]` + "\nMAX_WAIT=1h",
		`CONTAINER_STATUSES=CrashLoopBackOff` + "\n" + `TARGETS=[{"namespace":"a","service":"etcd","selectors":[""]}]` + "\nNAMESPACE=a",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, blob string) {
		m := map[string]string{}
		for _, line := range strings.Split(blob, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				m[k] = v
			}
		}
		o, err := LoadOptions(envOf(m))
		if err != nil {
			var cfg *envconf.ConfigError
			if !errors.As(err, &cfg) || len(cfg.Problems) == 0 {
				t.Fatalf("error %v is not a *envconf.ConfigError with problems", err)
			}
			for _, p := range cfg.Problems {
				if !strings.Contains(p, `="`) && !strings.HasPrefix(p, "no rule is enabled") {
					t.Fatalf("problem %q does not name a variable and its value", p)
				}
			}
			return
		}
		if len(o.Rules) == 0 || len(o.Selectors) == 0 || o.Schedule == nil {
			t.Fatalf("options without rules, selectors or schedule: %+v", o)
		}
		for _, tg := range o.Targets {
			if one := o.forTarget(tg); one.StartWhenReady == nil || len(one.Selectors) == 0 || one.Namespace == "" {
				t.Fatalf("target %+v gives a run without its gate, selectors or namespace", tg)
			}
			for _, sel := range o.forTarget(tg).Selectors {
				if sel.Empty() {
					t.Fatalf("target %+v gives an empty selector: it would select every pod", tg)
				}
			}
		}
	})
}

// FuzzLabelSelectors: LABEL_SELECTORS never panics and never yields a selector that selects
// every pod.
func FuzzLabelSelectors(f *testing.F) {
	for _, seed := range []string{`["app=a"]`, `["a in (b,c)","!d"]`, `[]`, `[""]`, `[" "]`, `null`, `["a", 1]`, `{"a":"b"}`, `["x>1","y notin (z)"]`, ``} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := LoadOptions(envOf(map[string]string{"LABEL_SELECTORS": s, "CONTAINER_STATUSES": "CrashLoopBackOff"}))
		if err != nil {
			return
		}
		if len(o.Selectors) == 0 {
			t.Fatalf("LABEL_SELECTORS=%q gave no selector", s)
		}
		for _, sel := range o.Selectors {
			if sel.Empty() {
				t.Fatalf("LABEL_SELECTORS=%q gave a selector matching every pod", s)
			}
			_ = sel.Matches(labels.Set{"app": "a"})
		}
	})
}
