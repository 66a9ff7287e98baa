//go:build e2e

package e2e

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Most tests share the cluster and run side by side. The one that restarts the API server
// cannot run beside them, but it need not make them wait either: it sets up and waits out its
// dependent's crash-loop back-off beside them, and disrupts the cluster only after they have
// all ended.
//
// Which tests run when is decided here, not by go test's -parallel: the longest tests (those
// that wait minutes for a kubelet back-off) start first, so the suite does not end with one of
// them running alone. go test releases its parallel tests in no fixed order.

// sharing counts the tests that run side by side and need the cluster as it is: a working
// API server above all. Every one of them registers before the parallel tests are released
// (parallel is called from the test's own goroutine while the sequential ones still run), so
// once the parallel tests run, the count only falls.
var sharing sync.WaitGroup

// slots admits the tests that share the cluster, at most n at once, long ones first.
var slots = struct {
	mu         sync.Mutex
	n          int // go test -parallel
	notArrived int // registered tests whose t.Parallel has not returned yet
	running    int
	queue      []admission
}{n: 4}

type admission struct {
	long  bool
	start chan struct{}
}

// takeOverParallel makes the -parallel go test was given the number of slots, and lifts go
// test's own limit, which would otherwise hold back a test the slots admit. TestMain calls it
// before m.Run.
func takeOverParallel() {
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, ok := f.Value.(flag.Getter).Get().(int); ok && n > 0 {
			slots.n = n
		}
		_ = f.Value.Set("1000")
	}
}

// parallel runs t beside the other tests that share the cluster once a slot is free, and
// keeps the tests that disrupt the whole cluster waiting until it has ended. Top-level tests
// call this (or parallelLong), never t.Parallel directly (TestEveryParallelTestSharesTheCluster
// keeps it so).
func parallel(t *testing.T) {
	t.Helper()
	share(t, false)
}

// parallelLong is parallel for a test that takes minutes: it gets a slot before the others.
func parallelLong(t *testing.T) {
	t.Helper()
	share(t, true)
}

func share(t *testing.T, long bool) {
	t.Helper()
	sharing.Add(1)
	slots.mu.Lock()
	slots.notArrived++
	slots.mu.Unlock()
	t.Parallel()

	a := admission{long: long, start: make(chan struct{})}
	slots.mu.Lock()
	slots.notArrived--
	// Long ones first; among equals, in the order they asked.
	i := len(slots.queue)
	for i > 0 && long && !slots.queue[i-1].long {
		i--
	}
	slots.queue = slices.Insert(slots.queue, i, a)
	admitLocked()
	slots.mu.Unlock()
	asked := time.Now()
	<-a.start
	// go test counts this wait in the test's time.
	if waited := time.Since(asked); waited > time.Second {
		t.Logf("started after %s waiting for one of the %d slots", waited.Round(time.Second), slots.n)
	}
	t.Cleanup(func() {
		slots.mu.Lock()
		slots.running--
		admitLocked()
		slots.mu.Unlock()
		sharing.Done()
	})
}

// admitLocked starts queued tests while slots are free, but only once every registered test
// has asked: go test releases them all at once, and a short test that woke first must not
// take the slot of a long one that woke a moment later.
func admitLocked() {
	if slots.notArrived > 0 {
		return
	}
	for slots.running < slots.n && len(slots.queue) > 0 {
		close(slots.queue[0].start)
		slots.queue = slots.queue[1:]
		slots.running++
	}
}

// disruptsTheCluster runs t beside the others too, for its set-up (which may be long: it
// waits out a kubelet back-off), and returns a channel that is closed once every test that
// shares the cluster has ended: from then on t may disrupt the cluster (restart the API
// server).
func disruptsTheCluster(t *testing.T) (othersEnded <-chan struct{}) {
	t.Helper()
	t.Parallel()
	ended := make(chan struct{})
	go func() {
		sharing.Wait()
		close(ended)
	}()
	return ended
}

// TestEveryParallelTestSharesTheCluster: a top-level test that called t.Parallel itself would
// not be counted in sharing, and the API server could be restarted under it; a subtest that
// called parallel would reach its slot only when its parent's function returned, and every
// slot waits until all registered tests have asked for one.
func TestEveryParallelTestSharesTheCluster(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing this package's test files: %v (%d found)", err, len(files))
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		// The calls of parallel and parallelLong allowed: statements of a Test function's own body.
		topLevel := map[*ast.CallExpr]bool{}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			for _, st := range fn.Body.List {
				es, ok := st.(*ast.ExprStmt)
				if !ok {
					continue
				}
				call, ok := es.X.(*ast.CallExpr)
				if !ok {
					continue
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Parallel" {
					t.Errorf("%s: %s calls t.Parallel(); call parallel(t) or parallelLong(t) (or disruptsTheCluster(t)) so that a test restarting the API server waits for it",
						fset.Position(st.Pos()), fn.Name.Name)
				}
				topLevel[call] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "parallel" || id.Name == "parallelLong") && !topLevel[call] {
				t.Errorf("%s: %s is called other than as a statement of a Test function's body (a subtest? use t.Parallel there)",
					fset.Position(call.Pos()), id.Name)
			}
			return true
		})
	}
}
