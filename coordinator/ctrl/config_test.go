package ctrl

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type inner struct {
	Arm       *bool                 `json:"arm,omitempty"`
	Selector  *metav1.LabelSelector `json:"selector,omitempty"`
	Threshold metav1.Duration       `json:"threshold"`
}

type embedded struct {
	WatchDuration string `json:"watchDuration"`
}

type section struct {
	embedded
	Services map[string]inner `json:"services"`
	List     []inner          `json:"list"`
	DryRun   bool             `json:"dryRun"`
	hidden   int
}

// One policy at every depth: an unknown key is dropped with a warning naming its path; a near
// miss of a field dependency-watchdog does not read is an error; a near miss of one of its
// own is a warning, as dependency-watchdog ignores it; a short new name is not taken for a
// short known one; values that decode themselves (durations) are not looked into.
func TestDropUnknownWarnsNamingThePathAndRefusesNearMissesOfDepwatchFields(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{
		"watchDuraton": "1m", "hidden": 1, "future": {"a": 1}, "DryRun": true,
		"services": {"a b": {"arm": true, "art": 1, "selector": {"matchLabel": {}}, "threshold": {"x": 1}}},
		"list": [{}, {"selecter": {}}]
	}`), &doc); err != nil {
		t.Fatal(err)
	}
	warnings, errs := DropUnknown(doc, reflect.TypeFor[section](), "top")
	wantWarnings := []string{
		"top.future: unknown field, ignored",
		"top.hidden: unknown field, ignored",
		`top.services."a b".art: unknown field, ignored`,
		"top.watchDuraton: unknown field, ignored (did you mean watchDuration?",
	}
	wantErrs := []string{
		"top.DryRun: unknown field; did you mean dryRun?",
		`top.services."a b".selector.matchLabel: unknown field; did you mean matchLabels?`,
		"top.list[1].selecter: unknown field; did you mean selector?",
	}
	if len(warnings) != len(wantWarnings) {
		t.Fatalf("warnings %q, want %q", warnings, wantWarnings)
	}
	for i, w := range wantWarnings {
		if !strings.HasPrefix(warnings[i], w) {
			t.Errorf("warning %d = %q, want it to start %q", i, warnings[i], w)
		}
	}
	for _, w := range wantErrs {
		if !slices.ContainsFunc(errs, func(e error) bool { return strings.HasPrefix(e.Error(), w) }) {
			t.Errorf("errors %v, want one starting %q", errs, w)
		}
	}
	if len(errs) != len(wantErrs) {
		t.Errorf("errors %v, want %d", errs, len(wantErrs))
	}
	// What is left decodes strictly.
	data, _ := json.Marshal(doc)
	var s section
	if err := StrictJSON(data, &s); err == nil || !strings.Contains(err.Error(), "threshold") {
		// threshold {"x": 1} is a wrong value, not an unknown field: the strict decode names it.
		t.Errorf("strict decode of what is left: %v, want the threshold's wrong value", err)
	}
}
