package reaper

import (
	"fmt"
	"strings"
	"testing"
)

// TestPodReaperListValuesAreAcceptedWithPodReapersMeaning: every list value pod-reaper accepts
// is accepted, with the meaning pod-reaper gives it (trailing commas, empty values, spaces),
// and a warning says what was odd. Only an empty POD_STATUSES item is refused (hostile_test.go):
// pod-reaper reads it as "every pod without a status reason".
func TestPodReaperListValuesAreAcceptedWithPodReapersMeaning(t *testing.T) {
	tests := []struct {
		name         string
		env          map[string]string
		wantSelector string // the label selector sent to the API server ("" = not checked)
		wantRule     string // fmt of the first rule ("" = not checked)
		wantWarning  string // "" = no warning at all
	}{
		{"trailing comma in EXCLUDE_LABEL_VALUES also excludes the empty value, as in pod-reaper",
			map[string]string{"EXCLUDE_LABEL_KEY": "reap", "EXCLUDE_LABEL_VALUES": "false,", "CHAOS_CHANCE": "1"},
			"reap notin (,false)", "", "stands for the empty value"},
		{"empty EXCLUDE_LABEL_VALUES excludes pods whose label is empty, as in pod-reaper",
			map[string]string{"EXCLUDE_LABEL_KEY": "reap", "EXCLUDE_LABEL_VALUES": "", "CHAOS_CHANCE": "1"},
			"reap notin ()", "", "stands for the empty value"},
		{"spaces around commas are ignored (pod-reaper failed on them in label values)",
			map[string]string{"REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": "a, b ,c", "CHAOS_CHANCE": "1"},
			"app in (a,b,c)", "", "spaces around items are ignored"},
		{"plain values: no warning",
			map[string]string{"REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": "a,b", "CHAOS_CHANCE": "1"},
			"app in (a,b)", "", ""},
		{"trailing comma in CONTAINER_STATUSES is dropped",
			map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff,OOMKilled,"},
			"", "{[CrashLoopBackOff OOMKilled]}", "ignored"},
		{"spaces in CONTAINER_STATUSES are trimmed (pod-reaper never matched \" OOMKilled\")",
			map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff, OOMKilled"},
			"", "{[CrashLoopBackOff OOMKilled]}", "spaces around items are ignored"},
		{"empty CONTAINER_STATUSES is a rule that matches nothing, as in pod-reaper",
			map[string]string{"CONTAINER_STATUSES": ""},
			"", "{[]}", "the rule matches no pod"},
		{"trailing comma in POD_STATUS_PHASES is dropped",
			map[string]string{"POD_STATUS_PHASES": "Failed,"},
			"", "{[Failed]}", "ignored"},
		{"duplicate values are read once",
			map[string]string{"POD_STATUSES": "Evicted,Evicted"},
			"", "{[Evicted]}", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := LoadOptions(envOf(tc.env))
			if err != nil {
				t.Fatalf("LoadOptions: %v", err)
			}
			if tc.wantSelector != "" && o.Selectors[0].String() != tc.wantSelector {
				t.Errorf("selector %q, want %q", o.Selectors[0].String(), tc.wantSelector)
			}
			if tc.wantRule != "" {
				if got := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(fmtRule(o.Rules[0]), "reaper.containerStatusesRule"), "reaper.podPhasesRule"), "reaper.podStatusesRule"); got != tc.wantRule {
					t.Errorf("rule %s, want %s", got, tc.wantRule)
				}
			}
			warnings := strings.Join(o.Warnings, "\n")
			if tc.wantWarning == "" && warnings != "" {
				t.Errorf("unexpected warnings: %s", warnings)
			}
			if !strings.Contains(warnings, tc.wantWarning) {
				t.Errorf("warnings %q do not say %q", warnings, tc.wantWarning)
			}
		})
	}
}

func fmtRule(r Rule) string { return fmt.Sprintf("%T%v", r, r) }
