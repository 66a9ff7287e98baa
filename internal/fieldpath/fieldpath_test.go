package fieldpath

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
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

// readerPackages are the packages that read another project's objects unstructured.
var readerPackages = []string{"../../coordinator/prober", "../../probe"}

// literalPathAllowed: the unstructured reads by a literal path that are not of Gardener's or
// MCM's objects, with the reason.
var literalPathAllowed = map[string]string{
	"probe/scale.go": "status.readyReplicas of the resource being scaled: a Kubernetes workload (Deployment, StatefulSet), not Gardener's or MCM's",
}

// The packages that read Gardener's and MCM's objects read them only through a declared
// Field, never with unstructured.Nested* on a path of their own: a path written at the
// call would escape the check of every Field against the objects written from those
// projects' types.
func TestGardenerAndMCMObjectsAreReadOnlyThroughDeclaredFields(t *testing.T) {
	for _, dir := range readerPackages {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			rel := strings.TrimPrefix(filepath.ToSlash(file), "../../")
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || pkg.Name != "unstructured" || !strings.HasPrefix(sel.Sel.Name, "Nested") && !strings.HasPrefix(sel.Sel.Name, "SetNested") {
					return true
				}
				for _, arg := range call.Args[1:] {
					if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if _, allowed := literalPathAllowed[rel]; !allowed {
							t.Errorf("%s: unstructured.%s(..., %s, ...) reads a path of its own; declare it as a Field of its kind's Set (prober.ClusterFields, probe.MachineFields) and read it through that", fset.Position(call.Pos()), sel.Sel.Name, lit.Value)
						}
						break
					}
				}
				return true
			})
		}
	}
}
