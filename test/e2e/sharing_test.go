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

// Most tests share the cluster and run side by side. A few measure something a busy machine
// stretches (a pod's start within seconds, the gaps between probes, the lab coordinator's
// CPU under a storm): they run first, in the quiet phase, each beside only the tests of its
// own quiet group. The one that restarts the API server cannot run beside anything, but it
// need not make the others wait either: it sets up and waits out its dependent's crash-loop
// back-off beside them, and disrupts the cluster only after they have all ended.
//
// Which tests run when is decided here, not by go test's -parallel: the quiet groups one after
// another, then the shared tests, the longest first (each that runs a minute or more says about
// how long), so the suite does not end with a long one running alone. go test releases its
// parallel tests in no fixed order.

// sharing counts the tests that run side by side and need the cluster as it is: a working
// API server above all. Every one of them registers before the parallel tests are released
// (the registration happens in the test's own goroutine before t.Parallel, while go test is
// still starting the top-level tests), so once the parallel tests run, the count only falls.
var sharing sync.WaitGroup

// slots admits the tests that share the cluster: the quiet groups one at a time, then at most
// n at once, the longest first.
var slots = struct {
	mu         sync.Mutex
	n          int // go test -parallel
	notArrived int // registered tests whose t.Parallel has not returned yet
	running    int
	group      string // the quiet group running now, "" for the shared tests
	quietLeft  int    // quiet tests not yet ended
	quietEnded chan struct{}
	queue      []admission
}{n: 4, quietEnded: make(chan struct{})}

type admission struct {
	group  string        // quiet group, "" for a test that shares the cluster with any other
	expect time.Duration // about how long the test runs beside the others; 0 for seconds
	start  chan struct{}
}

// before says whether a is admitted before b: the quiet groups first, in the order of their
// names (so each is kept together, and the order does not depend on which test woke first),
// then the longest tests first, so that the suite does not end with a long one running
// alone; among equals, in the order they asked.
func (a admission) before(b admission) bool {
	if a.group != "" || b.group != "" {
		return a.group != "" && (b.group == "" || a.group < b.group)
	}
	return a.expect > b.expect
}

// enqueue puts a into the admission queue behind every test admitted before it.
func enqueue(queue []admission, a admission) []admission {
	i := len(queue)
	for i > 0 && a.before(queue[i-1]) {
		i--
	}
	return slices.Insert(queue, i, a)
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
// call this (or parallelLong, or quiet), never t.Parallel directly
// (TestEveryParallelTestSharesTheCluster keeps it so).
func parallel(t *testing.T) {
	t.Helper()
	share(t, admission{})
}

// parallelLong is parallel for a test that takes a minute or more beside the others (expect,
// about how long: the "started after" and PASS lines of a make e2e log tell): the longest
// tests get their slots first. A test whose length varies gives its longer figure: the probe
// tests wait for the lab coordinator's next shard Job, and took 30 s in one run and 85 s in
// the next; left for last, the long case ran alone at the end. A wrong figure costs the suite
// time, never a failure.
func parallelLong(t *testing.T, expect time.Duration) {
	t.Helper()
	share(t, admission{expect: expect})
}

// everyShoot is held by each test whose prober selects every namespace of the cluster labelled
// gardener.cloud/role=shoot, as gardenlet's prober config does (dependency-watchdog's prober
// Deployment on depwatch's image; a coordinator started from gardenlet's prober ConfigMap):
// two at once would each probe the other's shoot, and each test asserts that its shoot is
// probed by its own prober alone, and that its prober logs no error about another's.
var everyShoot sync.Mutex

// selectsEveryShoot makes t the only running test whose prober selects every shoot
// namespace, until it ends (its cleanups, which unlabel its shoot and stop its prober, run
// first). It waits in t's slot: in the suite's order the two such tests seldom meet.
func selectsEveryShoot(t *testing.T) {
	t.Helper()
	everyShoot.Lock()
	t.Cleanup(everyShoot.Unlock)
}

// quiet runs t in the quiet phase, before the tests that share the cluster, beside only the
// other tests of the same group: tests that neither disturb each other's measurements nor
// count what the others do (the lab coordinator's Job launches, above all).
func quiet(t *testing.T, group string) {
	t.Helper()
	if group == "" {
		t.Fatal("quiet needs the name of a group")
	}
	share(t, admission{group: group})
}

func share(t *testing.T, a admission) {
	t.Helper()
	sharing.Add(1)
	slots.mu.Lock()
	slots.notArrived++
	if a.group != "" {
		slots.quietLeft++
	}
	slots.mu.Unlock()
	t.Parallel()

	a.start = make(chan struct{})
	slots.mu.Lock()
	slots.notArrived--
	slots.queue = enqueue(slots.queue, a)
	admitLocked()
	slots.mu.Unlock()
	asked := time.Now()
	<-a.start
	// go test counts this wait in the test's time.
	if waited := time.Since(asked); waited > time.Second {
		t.Logf("started after %s waiting for its turn (%d slots, quiet groups first)", waited.Round(time.Second), slots.n)
	}
	t.Cleanup(func() {
		slots.mu.Lock()
		slots.running--
		if a.group != "" {
			slots.quietLeft--
		}
		admitLocked()
		slots.mu.Unlock()
		sharing.Done()
	})
}

// admitLocked starts queued tests while their turn has come, but only once every registered
// test has asked: go test releases them all at once, and a short test that woke first must
// not take the slot of a long one that woke a moment later. A quiet group starts when nothing
// else runs and is admitted whole; the shared tests start when no quiet test is left.
func admitLocked() {
	if slots.notArrived > 0 {
		return
	}
	for len(slots.queue) > 0 {
		next := slots.queue[0]
		if slots.running == 0 {
			slots.group = next.group
		}
		if next.group != slots.group || (next.group == "" && slots.running >= slots.n) {
			break
		}
		close(next.start)
		slots.queue = slots.queue[1:]
		slots.running++
	}
	if slots.quietLeft == 0 {
		select {
		case <-slots.quietEnded:
		default:
			close(slots.quietEnded)
		}
	}
}

// disruptsTheCluster runs t beside the shared tests, for its set-up (which may be long: it
// waits out a kubelet back-off), once the quiet phase has ended, and returns a channel that is
// closed once every other test has ended: from then on t may disrupt the cluster (restart the
// API server).
func disruptsTheCluster(t *testing.T) (othersEnded <-chan struct{}) {
	t.Helper()
	t.Parallel()
	slots.mu.Lock()
	admitLocked() // closes quietEnded when no test asked for the quiet phase
	slots.mu.Unlock()
	<-slots.quietEnded
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
		// The calls of parallel, parallelLong and quiet allowed: statements of a Test function's own body.
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
					t.Errorf("%s: %s calls t.Parallel(); call parallel(t), parallelLong(t, d) or quiet(t, group) (or disruptsTheCluster(t)) so that a test restarting the API server waits for it",
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
			if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "parallel" || id.Name == "parallelLong" || id.Name == "quiet") && !topLevel[call] {
				t.Errorf("%s: %s is called other than as a statement of a Test function's body (a subtest? use t.Parallel there)",
					fset.Position(call.Pos()), id.Name)
			}
			return true
		})
	}
}

// TestAdmissionPutsQuietGroupsFirstTogetherThenLongTests: whatever order the tests wake in,
// the quiet groups come first, each whole and in the order of their names, then the shared
// tests, longest first, each kind in the order it asked.
func TestAdmissionPutsQuietGroupsFirstTogetherThenLongTests(t *testing.T) {
	names := map[admission]string{}
	arrivals := []admission{}
	for _, a := range []struct {
		name   string
		group  string
		expect time.Duration
	}{
		{"short1", "", 0}, {"timingA", "timing", 0}, {"long1", "", 2 * time.Minute},
		{"stormA", "storm", 0}, {"short2", "", 0}, {"timingB", "timing", 0},
		{"long2", "", 2 * time.Minute}, {"stormB", "storm", 0}, {"deletion", "deletion", 0},
		{"longest", "", 5 * time.Minute},
	} {
		adm := admission{group: a.group, expect: a.expect, start: make(chan struct{})}
		names[adm] = a.name
		arrivals = append(arrivals, adm)
	}
	want := "deletion stormA stormB timingA timingB longest long1 long2 short1 short2"
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, {4, 0, 6, 9, 1, 8, 3, 7, 2, 5}} {
		var queue []admission
		for _, i := range order {
			queue = enqueue(queue, arrivals[i])
		}
		var got []string
		for _, a := range queue {
			got = append(got, names[a])
		}
		// Among equals the order is the arrival order: the whole order is known only for
		// the arrivals as listed; for the others, compare the kinds.
		if order[0] == 0 && strings.Join(got, " ") != want {
			t.Errorf("admission order %q, want %q", strings.Join(got, " "), want)
		}
		kinds := make([]string, len(got))
		for i, n := range got {
			kinds[i] = strings.TrimRight(n, "12AB")
		}
		if k := strings.Join(kinds, " "); k != "deletion storm storm timing timing longest long long short short" {
			t.Errorf("arrivals %v: admitted as %q", order, strings.Join(got, " "))
		}
	}
}
