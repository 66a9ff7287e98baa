// Package fieldpath names the fields depwatch reads from other projects' objects. depwatch
// reads Gardener's Cluster and machine-controller-manager's Machine unstructured, without
// their Go modules, so nothing but a test can tell a misspelt field from an absent one: a
// wrong name reads as "not set" for ever. Each such field is therefore declared once, in
// the Set of its kind, and read only through its Field; the Set is the list that a test
// checks against objects written from those projects' own types (test/upstream), so a
// field added later is checked as well.
package fieldpath

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Set is every field depwatch reads from one kind of object. The zero value is ready to use;
// Fields are added at package initialisation.
type Set struct {
	fields []*Field
}

// Field is one field: a path from the object's root, or, when list is set, from each item
// of that list field.
type Field struct {
	path []string
	list *Field
}

// Field declares the field at path from the object's root.
func (s *Set) Field(path ...string) *Field {
	f := &Field{path: path}
	s.fields = append(s.fields, f)
	return f
}

// ItemField declares the field at path within each item of the list field list (which must
// be of this Set).
func (s *Set) ItemField(list *Field, path ...string) *Field {
	f := &Field{path: path, list: list}
	s.fields = append(s.fields, f)
	return f
}

// Fields are the declared fields, in declaration order.
func (s *Set) Fields() []*Field { return append([]*Field(nil), s.fields...) }

// Path is the field's path from the object's root, or from an item of its list.
func (f *Field) Path() []string { return append([]string(nil), f.path...) }

// List is the list field whose items hold this field; nil for a field of the root.
func (f *Field) List() *Field { return f.list }

// String is the field's path as people write it: spec.shoot.status.hibernated, and for a
// field of a list's items spec.shoot.spec.provider.workers[].name.
func (f *Field) String() string {
	p := strings.Join(f.path, ".")
	if f.list != nil {
		return f.list.String() + "[]." + p
	}
	return p
}

// The readers take the object whose root the path starts from: the object itself, or for
// an item field one item of its list. They are unstructured's Nested* readers on the path.

func (f *Field) Value(obj map[string]any) (any, bool, error) {
	return unstructured.NestedFieldNoCopy(obj, f.path...)
}

func (f *Field) Str(obj map[string]any) (string, bool, error) {
	return unstructured.NestedString(obj, f.path...)
}

func (f *Field) Bool(obj map[string]any) (bool, bool, error) {
	return unstructured.NestedBool(obj, f.path...)
}

func (f *Field) Slice(obj map[string]any) ([]any, bool, error) {
	return unstructured.NestedSlice(obj, f.path...)
}

func (f *Field) Strings(obj map[string]any) ([]string, bool, error) {
	return unstructured.NestedStringSlice(obj, f.path...)
}

func (f *Field) Map(obj map[string]any) (map[string]any, bool, error) {
	return unstructured.NestedMap(obj, f.path...)
}

// In says whether obj has the field with a value other than null: at its path from the
// root, or for an item field in at least one item of its list.
func (f *Field) In(obj map[string]any) bool {
	if f.list == nil {
		v, found, err := f.Value(obj)
		return found && err == nil && v != nil
	}
	items, _, _ := f.list.Slice(obj)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && (&Field{path: f.path}).In(m) {
			return true
		}
	}
	return false
}
