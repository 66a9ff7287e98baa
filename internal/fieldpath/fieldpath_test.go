package fieldpath

import (
	"testing"
)

func TestFieldsAreNamedAndFoundAsPeopleWriteThem(t *testing.T) {
	var s Set
	workers := s.Field("spec", "workers")
	name := s.ItemField(workers, "name")
	conds := s.ItemField(workers, "mcm", "conditions")
	hib := s.Field("status", "hibernated")
	obj := map[string]any{
		"spec":   map[string]any{"workers": []any{map[string]any{"name": "a"}, "not an object", map[string]any{"mcm": map[string]any{"conditions": []any{"X"}}}}},
		"status": map[string]any{"hibernated": false, "gone": nil},
	}
	for _, tc := range []struct {
		field *Field
		name  string
		in    bool
	}{
		{workers, "spec.workers", true},
		{name, "spec.workers[].name", true},
		{conds, "spec.workers[].mcm.conditions", true},
		{hib, "status.hibernated", true}, // false is a value
		{s.Field("status", "gone"), "status.gone", false},
		{s.Field("status", "isHibernated"), "status.isHibernated", false},
		{s.ItemField(workers, "zones"), "spec.workers[].zones", false},
	} {
		if got := tc.field.String(); got != tc.name {
			t.Errorf("String() = %q, want %q", got, tc.name)
		}
		if got := tc.field.In(obj); got != tc.in {
			t.Errorf("%s: In = %v, want %v", tc.name, got, tc.in)
		}
	}
	if got := len(s.Fields()); got != 7 {
		t.Errorf("the set holds %d fields, want the 7 declared", got)
	}
}
