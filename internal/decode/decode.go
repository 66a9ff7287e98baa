// Package decode reads depwatch's JSON documents (the coordinator's config file after its YAML
// is converted, the probe's DEPENDENT_RESOURCES) into their Go types with sigs.k8s.io/json's
// strict decoder, and says what was wrong with each by its path: the unknown fields the
// decoder reports, each value that did not decode, and the known field a misspelt one was
// probably meant to be.
package decode

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/agnivade/levenshtein"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/json"
)

// Unknown is a field the document has and its type does not.
type Unknown struct {
	Path string // as Strict's problems name it, under Strict's path
	// Near is the known field at the same place that the name most likely misspells, or "".
	Near string
}

// Strict decodes the JSON document data into into (a pointer), case-sensitively, as the API
// server does. It returns the document's unknown fields, which the caller judges (a warning
// or a refusal), and every value that did not decode, each named by its path under path. into
// holds every value that did decode, so the caller can validate the rest without repeating a
// problem: a failing value is found by decoding the document's parts one at a time, then left
// out of the final decode.
func Strict(path *field.Path, data []byte, into any) ([]Unknown, field.ErrorList) {
	root := reflect.TypeOf(into)
	strict, err := json.UnmarshalStrict(data, into, json.DisallowUnknownFields)
	var errs field.ErrorList
	if err != nil {
		var doc any
		if json.UnmarshalCaseSensitivePreserveInts(data, &doc) != nil {
			return nil, field.ErrorList{field.Invalid(path, string(data), "not valid JSON: "+strings.TrimPrefix(err.Error(), "json: "))}
		}
		errs = locate(path, root, &doc)
		// The decoder reports unknown fields only when every value decodes: decode what is
		// left again, for the values that do decode and the unknown fields.
		reflect.ValueOf(into).Elem().SetZero()
		b, _ := stdjson.Marshal(doc) // decoded from JSON: cannot fail
		strict, _ = json.UnmarshalStrict(b, into, json.DisallowUnknownFields)
	}
	var unknown []Unknown
	for _, s := range strict {
		var fe json.FieldError
		if errors.As(s, &fe) {
			segs := strings.Split(fe.FieldPath(), ".")
			unknown = append(unknown, Unknown{Path: pathOf(path, segs), Near: nearMiss(segs[len(segs)-1], typeAt(root, segs[:len(segs)-1]))})
		}
	}
	return unknown, errs
}

// locate finds each value of *doc that does not decode into root's type by decoding the
// document's parts one at a time, names it by its path, and drops it from *doc.
func locate(path *field.Path, root reflect.Type, doc *any) field.ErrorList {
	try := func(v any) error {
		b, err := stdjson.Marshal(v)
		if err != nil {
			return err
		}
		_, err = json.UnmarshalStrict(b, reflect.New(root.Elem()).Interface(), json.DisallowUnknownFields)
		return err
	}
	var errs field.ErrorList
	// at looks into v, the document's value at p and segs; wrap puts a value where v is in an
	// otherwise empty document, drop removes v from the document.
	var at func(p *field.Path, segs []string, wrap func(any) any, v any, drop func())
	at = func(p *field.Path, segs []string, wrap func(any) any, v any, drop func()) {
		err := try(wrap(v))
		if err == nil {
			return
		}
		before := len(errs)
		switch c := v.(type) {
		case map[string]any:
			if try(wrap(map[string]any{})) == nil {
				for _, k := range slices.Sorted(maps.Keys(c)) {
					at(p.Child(PathKey(k)), slices.Concat(segs, []string{k}), func(x any) any { return wrap(map[string]any{k: x}) }, c[k], func() { delete(c, k) })
				}
			}
		case []any:
			if try(wrap([]any{})) == nil {
				for i := range c {
					pad := func(x any) any { s := make([]any, i+1); s[i] = x; return wrap(s) }
					at(p.Index(i), slices.Concat(segs, []string{"[" + strconv.Itoa(i) + "]"}), pad, c[i], func() { c[i] = nil })
				}
			}
		}
		if len(errs) == before { // the value itself, not one inside it
			errs = append(errs, field.Invalid(p, v, detail(err, typeAt(root, segs))))
			drop()
		}
	}
	at(path, nil, func(x any) any { return x }, *doc, func() { *doc = nil })
	return errs
}

// detail says what a value that did not decode into t must be.
func detail(err error, t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var te *stdjson.UnmarshalTypeError
	switch {
	case t == reflect.TypeFor[metav1.Duration]():
		return `must be a Go duration string such as "10s" or "1m30s"`
	case errors.As(err, &te) && te.Type != nil:
		switch k := te.Type.Kind(); {
		case k == reflect.Bool:
			return "must be true or false"
		case k >= reflect.Int && k <= reflect.Uint64:
			return fmt.Sprintf("must be an integer (%s)", te.Type)
		case k == reflect.Float32 || k == reflect.Float64:
			return "must be a number"
		case k == reflect.String:
			return "must be a string"
		case k == reflect.Slice || k == reflect.Array:
			return "must be a list"
		default:
			return "must be an object"
		}
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// Problem writes one of Strict's problems, or a validation's, as depwatch's messages say them:
// PATH=<the value as JSON>: what is wrong, or PATH: required, what it must be.
func Problem(e *field.Error) string {
	switch e.Type {
	case field.ErrorTypeInvalid:
		raw, err := stdjson.Marshal(e.BadValue)
		if err != nil {
			raw = []byte("?")
		}
		return fmt.Sprintf("%s=%s: %s", e.Field, shorten(string(raw)), e.Detail)
	case field.ErrorTypeRequired:
		return fmt.Sprintf("%s: required, %s", e.Field, e.Detail)
	case field.ErrorTypeDuplicate:
		return fmt.Sprintf("%s: %v", e.Field, e.BadValue)
	}
	return e.Error()
}

// Without is errs but those about a field in invalid or inside one (validation would only
// repeat that it is wrong, or call it missing).
func Without(errs, invalid field.ErrorList) field.ErrorList {
	return slices.DeleteFunc(errs, func(e *field.Error) bool {
		return slices.ContainsFunc(invalid, func(bad *field.Error) bool {
			return e.Field == bad.Field || strings.HasPrefix(e.Field, bad.Field+".") || strings.HasPrefix(e.Field, bad.Field+"[")
		})
	})
}

// Problems writes each of errs with Problem.
func Problems(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, Problem(e))
	}
	return out
}

func shorten(s string) string {
	if len(s) <= 200 {
		return s
	}
	return strings.ToValidUTF8(s[:200], "") + "..."
}

// PathKey is a map key as it appears in a field path: as it is when it is plain, quoted when it
// holds spaces, quotes or control characters, so that a problem stays on one line and its
// field is recognisable.
func PathKey(k string) string {
	if k == "" || strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) >= 0 {
		return strconv.Quote(k)
	}
	return k
}

// pathOf writes the decoder's path segments (keys, a key's indices in brackets) under path.
func pathOf(path *field.Path, segs []string) string {
	var b strings.Builder
	if path != nil {
		b.WriteString(path.String())
	}
	for _, s := range segs {
		key, index, _ := strings.Cut(s, "[")
		if key != "" || index == "" {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(PathKey(key))
		}
		if index != "" {
			b.WriteString("[" + index)
		}
	}
	return b.String()
}

// typeAt is the Go type the document's value at segs decodes into (root's), nil where segs
// leave the types (a value that decodes itself, such as a duration).
func typeAt(t reflect.Type, segs []string) reflect.Type {
	for _, s := range segs {
		key, index, _ := strings.Cut(s, "[")
		for ; t != nil; t = t.Elem() {
			if t.Kind() != reflect.Pointer {
				break
			}
		}
		switch {
		case key == "" || t == nil:
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			t = JSONFields(t)[key]
		default:
			return nil
		}
		for range strings.Count(index, "[") + min(1, len(index)) {
			if t == nil || (t.Kind() != reflect.Slice && t.Kind() != reflect.Array) {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

// JSONFields are the json names of struct type t's fields and their types, embedded structs
// inlined, as the decoder reads them.
func JSONFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || (!f.IsExported() && !f.Anonymous):
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, JSONFields(f.Type))
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

// nearMiss is the field of struct type t (if it is one) that k most likely misspells: the same
// letters but for case, or a few edits away (one per four letters of the field, at most two,
// so that a short new field is not taken for a short known one).
func nearMiss(k string, t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	for _, f := range slices.Sorted(maps.Keys(JSONFields(t))) {
		if strings.EqualFold(k, f) || levenshtein.ComputeDistance(strings.ToLower(k), strings.ToLower(f)) <= min(2, len(f)/4) {
			return f
		}
	}
	return ""
}
