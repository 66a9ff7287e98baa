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
var slots = newSlotTable(4)

// slotTable is the admission's state; slots is the suite's one table.
type slotTable struct {
	mu         sync.Mutex
	n          int // go test -parallel
	notArrived int // registered tests whose t.Parallel has not returned yet
	running    int
	idle       int                 // shared tests that lent their slot while they wait (lend)
	shared     map[*testing.T]bool // the shared tests running now, which may lend their slot
	group      string              // the quiet group running now, "" for the shared tests
	quietLeft  int                 // quiet tests not yet ended
	quietEnded chan struct{}
	queue      []admission
}

func newSlotTable(n int) *slotTable {
	return &slotTable{n: n, quietEnded: make(chan struct{}), shared: map[*testing.T]bool{}}
}

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
	slots.admitLocked()
	slots.mu.Unlock()
	asked := time.Now()
	<-a.start
	if a.group == "" {
		slots.mu.Lock()
		slots.shared[t] = true
		slots.mu.Unlock()
	}
	// go test counts this wait in the test's time.
	if waited := time.Since(asked); waited > time.Second {
		t.Logf("started after %s waiting for its turn (%d slots, quiet groups first)", waited.Round(time.Second), slots.n)
	}
	t.Cleanup(func() {
		slots.mu.Lock()
		delete(slots.shared, t)
		slots.running--
		if a.group != "" {
			slots.quietLeft--
		}
		slots.admitLocked()
		slots.mu.Unlock()
		sharing.Done()
	})
}

// admitLocked starts queued tests while their turn has come, but only once every registered
// test has asked: go test releases them all at once, and a short test that woke first must
// not take the slot of a long one that woke a moment later. A quiet group starts when nothing
// else runs and is admitted whole; the shared tests start when no quiet test is left.
func (s *slotTable) admitLocked() {
	if s.notArrived > 0 {
		return
	}
	for len(s.queue) > 0 {
		next := s.queue[0]
		if s.running == 0 {
			s.group = next.group
		}
		if next.group != s.group || (next.group == "" && (s.running >= s.n || s.running+s.idle >= s.maxInFlight())) {
			break
		}
		close(next.start)
		s.queue = s.queue[1:]
		s.running++
	}
	if s.quietLeft == 0 {
		select {
		case <-s.quietEnded:
		default:
			close(s.quietEnded)
		}
	}
}

// idle lends t's slot to the next test in the queue while t only waits for the kubelet's
// clock (a crash-loop back-off growing until enough of it is ahead: a minute or two in which
// the test's pods cost the node a container start per back-off), and returns the function
// that takes it back. Call it as `defer idle(t)()`. Only a shared test lends its slot: a quiet
// group must stay alone, and a subtest or the disruptive test holds none.
func idle(t *testing.T) (resume func()) {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if !slots.shared[t] {
		return func() {}
	}
	lent := time.Now()
	back := slots.lendLocked()
	return func() {
		back()
		// The suite's figures (docs/development.md) add these up.
		if d := time.Since(lent); d > time.Second {
			t.Logf("lent its slot for %s while it waited for a back-off", d.Round(time.Second))
		}
	}
}

// lendLocked frees a running test's slot for the next in the queue and returns the function
// that takes it back at once, full or not: the lender's back-off ahead must not be spent in
// the queue. So that the lenders' return does not crowd the cores, no new test starts while
// maxInFlight tests have started and not ended, lenders included.
func (s *slotTable) lendLocked() (resume func()) {
	s.running--
	s.idle++
	s.admitLocked()
	return func() {
		s.mu.Lock()
		s.idle--
		s.running++
		s.mu.Unlock()
	}
}

// maxInFlight: half as many again as the slots.
func (s *slotTable) maxInFlight() int { return s.n + s.n/2 }

// disruptsTheCluster runs t beside the shared tests, for its set-up (which may be long: it
// waits out a kubelet back-off), once the quiet phase has ended, and returns a channel that is
// closed once every other test has ended: from then on t may disrupt the cluster (restart the
// API server).
func disruptsTheCluster(t *testing.T) (othersEnded <-chan struct{}) {
	t.Helper()
	t.Parallel()
	slots.mu.Lock()
	slots.admitLocked() // closes quietEnded when no test asked for the quiet phase
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

// TestALentSlotAdmitsTheNextTestAndComesBackAtOnce: a test that waits for a back-off lends
// its slot to the next in the queue; taking it back never waits, even when every slot is
// taken; and no new test starts while half as many again as the slots have started and not
// ended, the lenders included.
func TestALentSlotAdmitsTheNextTestAndComesBackAtOnce(t *testing.T) {
	s := newSlotTable(2) // maxInFlight 3
	var queued []admission
	for range 4 {
		a := admission{start: make(chan struct{})}
		queued = append(queued, a)
		s.queue = enqueue(s.queue, a)
	}
	started := func() (n int) {
		for _, a := range queued {
			select {
			case <-a.start:
				n++
			default:
			}
		}
		return n
	}
	check := func(step string, wantStarted, wantRunning int) {
		t.Helper()
		if got := started(); got != wantStarted || s.running != wantRunning {
			t.Errorf("%s: %d tests started, %d running; want %d started, %d running", step, got, s.running, wantStarted, wantRunning)
		}
	}
	s.mu.Lock()
	s.admitLocked()
	s.mu.Unlock()
	check("at the start", 2, 2)

	s.mu.Lock()
	resumeFirst := s.lendLocked()
	s.mu.Unlock()
	check("the first lender's wait", 3, 2)

	s.mu.Lock()
	resumeSecond := s.lendLocked()
	s.mu.Unlock()
	check("a second lender's wait, three in flight", 3, 1)

	resumeFirst()
	resumeSecond()
	check("both lenders back, over the two slots", 3, 3)

	// A test ends: still three in flight, and three running for two slots: none starts.
	s.mu.Lock()
	s.running--
	s.admitLocked()
	s.mu.Unlock()
	check("one ended, two running", 3, 2)
	s.mu.Lock()
	s.running--
	s.admitLocked()
	s.mu.Unlock()
	check("two ended", 4, 2)
}
