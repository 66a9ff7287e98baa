package ctrl

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	Count    int32            `json:"count"`
	hidden   int
}

// One policy at every depth: an unknown key is a warning naming its path; a near miss of a
// field dependency-watchdog does not read is refused; a near miss of one of its own is a
// warning, as dependency-watchdog ignores it; a short new name is not taken for a short known
// one; a value that does not decode is refused by its path, and everything else decodes.
func TestDecodeWarnsNamingThePathAndRefusesNearMissesOfDepwatchFields(t *testing.T) {
	var s section
	warnings, refused, invalid := Decode(field.NewPath("top"), []byte(`{
		"watchDuraton": "1m", "hidden": 1, "future": {"a": 1}, "DryRun": true, "count": "x",
		"services": {"a b": {"arm": true, "art": 1, "selector": {"matchLabel": {}}, "threshold": {"x": 1}}},
		"list": [{}, {"selecter": {}, "threshold": "2s"}]
	}`), &s, nil)
	wantWarnings := []string{
		"top.future: unknown field, ignored",
		"top.hidden: unknown field, ignored",
		`top.services."a b".art: unknown field, ignored`,
		"top.watchDuraton: unknown field, ignored (did you mean watchDuration?",
	}
	wantRefused := []string{
		"top.DryRun: unknown field; did you mean dryRun?",
		`top.services."a b".selector.matchLabel: unknown field; did you mean matchLabels?`,
		"top.list[1].selecter: unknown field; did you mean selector?",
		`top.count="x": must be an integer`,
		`top.services."a b".threshold={"x":1}: must be a Go duration string`,
	}
	slices.Sort(warnings)
	if len(warnings) != len(wantWarnings) {
		t.Fatalf("warnings %q, want %q", warnings, wantWarnings)
	}
	for i, w := range wantWarnings {
		if !strings.HasPrefix(warnings[i], w) {
			t.Errorf("warning %d = %q, want it to start %q", i, warnings[i], w)
		}
	}
	for _, w := range wantRefused {
		if !slices.ContainsFunc(refused, func(e error) bool { return strings.HasPrefix(e.Error(), w) }) {
			t.Errorf("refused %v, want one starting %q", refused, w)
		}
	}
	if len(refused) != len(wantRefused) || len(invalid) != 2 {
		t.Errorf("refused %v (invalid %v), want %d of them, 2 invalid values", refused, invalid, len(wantRefused))
	}
	// What did decode is there, so validation can judge it.
	if s.DryRun || s.List[1].Threshold.Duration.String() != "2s" || s.Services["a b"].Arm == nil {
		t.Errorf("the values that decode must be decoded: %+v", s)
	}
	if !Undecoded(errString(`top.count: required`), invalid) || Undecoded(errString("top.dryRun: x"), invalid) {
		t.Error("Undecoded must tell validation's word on an undecoded field from one on a decoded field")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
