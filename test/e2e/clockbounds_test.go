package e2e

// This file has no build tag: `make unit` runs it without a cluster, so a pass/fail decision
// on a bare wall-clock bound is refused before the suite ever runs on a loaded machine.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// derivedBound is the comment that lets a comparison with a literal duration decide a test:
// it must say what the bound is derived from (a window the test configured, a back-off the
// kubelet reported), on the comparison's line or in the comment just above it.
const derivedBound = "derived bound:"

// timeUnits are the time package's units; a comparison with an expression built from one of
// them compares a measured time with a number of seconds.
var timeUnits = map[string]bool{"Nanosecond": true, "Microsecond": true, "Millisecond": true, "Second": true, "Minute": true, "Hour": true}

// TestNoE2EVerdictOnABareWallClockBound: the e2e suite runs beside cold builds, fuzzing and
// other tests on two cores, where a step that takes one second on a quiet machine takes ten.
// A test decides on who acted, in what order and before what (the kubelet's own restart, the
// end of a window it configured), not on how many seconds something took: those figures go
// to the test's log and to the benchmarks (docs/benchmarks.md). This test refuses an `if`
// that compares with a literal duration (N*time.Second, ...) and fails the test in its body,
// and a failure message that says "within", unless a "derived bound:" comment names what the
// bound is derived from. Timeouts of waits (hang catchers) are not verdicts and are not
// checked. The rule: docs/development.md, "No verdict on a wall-clock bound".
func TestNoE2EVerdictOnABareWallClockBound(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the e2e test files: %v (%d found)", err, len(files))
	}
	for _, name := range files {
		// Benchmarks measure: their targets are theirs to check. This file names the word.
		if strings.Contains(name, "bench") || name == "clockbounds_test.go" {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		excused := map[int]bool{} // lines a derived-bound comment covers: its own and the next
		for _, cg := range f.Comments {
			if strings.Contains(cg.Text(), derivedBound) {
				for line := fset.Position(cg.Pos()).Line; line <= fset.Position(cg.End()).Line+1; line++ {
					excused[line] = true
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.IfStmt:
				if cmp := clockComparison(n.Cond); cmp != nil && failsTheTest(n.Body) && !excused[fset.Position(cmp.Pos()).Line] {
					t.Errorf("%s: a test fails on a comparison with a literal duration; assert order and actors instead (figures go to t.Logf and docs/benchmarks.md), or say what the bound is derived from in a %q comment",
						fset.Position(cmp.Pos()), derivedBound)
				}
			case *ast.CallExpr:
				if isFailure(n) {
					for _, a := range n.Args {
						if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.Contains(lit.Value, "within") && !excused[fset.Position(lit.Pos()).Line] {
							t.Errorf("%s: a failure message says %q: a test's verdict is not a time bound", fset.Position(lit.Pos()), "within")
						}
					}
				}
			}
			return true
		})
	}
}

// clockComparison returns the first ordering comparison in cond with an operand built from a
// time unit, or nil.
func clockComparison(cond ast.Expr) *ast.BinaryExpr {
	var found *ast.BinaryExpr
	ast.Inspect(cond, func(n ast.Node) bool {
		b, ok := n.(*ast.BinaryExpr)
		if !ok || found != nil {
			return found == nil
		}
		switch b.Op {
		case token.LSS, token.LEQ, token.GTR, token.GEQ:
			if usesTimeUnit(b.X) || usesTimeUnit(b.Y) {
				found = b
				return false
			}
		}
		return true
	})
	return found
}

func usesTimeUnit(e ast.Expr) bool {
	uses := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "time" && timeUnits[sel.Sel.Name] {
				uses = true
			}
		}
		return !uses
	})
	return uses
}

// failsTheTest tells whether the block calls t.Error, t.Errorf, t.Fatal or t.Fatalf (on any
// receiver) outside a function literal.
func failsTheTest(b *ast.BlockStmt) bool {
	fails := false
	ast.Inspect(b, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if c, ok := n.(*ast.CallExpr); ok && isFailure(c) {
			fails = true
		}
		return !fails
	})
	return fails
}

func isFailure(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch sel.Sel.Name {
	case "Error", "Errorf", "Fatal", "Fatalf":
		return true
	}
	return false
}

// TestClockComparisonTellsABoundFromAnOrder: the rule above catches the bounds that made the
// suite red on loaded machines and lets order and derived quantities through.
func TestClockComparisonTellsABoundFromAnOrder(t *testing.T) {
	for _, c := range []struct {
		cond  string
		bound bool
	}{
		{"d > 10*time.Second", true},
		{"took > 10*time.Second || !ok", true},
		{"armedAfter > 3*time.Second", true},
		{"time.Since(start) >= time.Minute", true},
		{"!readyAt.Before(cl.kubeletRestart)", false},
		{"left < d", false},
		{"len(pods) > 2", false},
		{"d >= maxKubeletBackoff", false},
		{"ctx.Err() == nil && d == time.Second", false},
	} {
		expr, err := parser.ParseExpr(c.cond)
		if err != nil {
			t.Fatalf("parsing %q: %v", c.cond, err)
		}
		if got := clockComparison(expr) != nil; got != c.bound {
			t.Errorf("%q: a comparison with a literal duration: %v, want %v", c.cond, got, c.bound)
		}
	}
}
