package reaper

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// TestGateStepWaitsOpensPausesResumesAndEnds: the one gate of a run of one service and of each
// target of a batch run, decided from what is known of that run's service alone.
func TestGateStepWaitsOpensPausesResumesAndEnds(t *testing.T) {
	start := t0
	rules := gateRules{runDuration: 5 * time.Minute, maxWait: time.Hour, armedAt: start}
	at := func(d time.Duration) time.Time { return start.Add(d) }
	open := func(end time.Duration, seen int) gateState {
		return gateState{phase: phaseOpen, seenReturns: seen, windowEnd: at(end)}
	}
	paused := func(end time.Duration, seen int) gateState {
		return gateState{phase: phasePaused, seenReturns: seen, windowEnd: at(end)}
	}
	for _, tc := range []struct {
		name  string
		rules gateRules
		s     gateState
		v     serviceView
		now   time.Duration
		want  gateState
		step  gateStep
	}{
		{
			name: "waits while the caches have not synced, even if a return was recorded",
			s:    gateState{}, v: serviceView{Known: false, Ready: true, Returns: 1, LastReturn: at(time.Second)}, now: 2 * time.Second,
			want: gateState{}, step: gateStep{wakeAt: at(time.Hour)},
		},
		{
			name: "waits while its service is down",
			s:    gateState{}, v: serviceView{Known: true}, now: 10 * time.Second,
			want: gateState{}, step: gateStep{wakeAt: at(time.Hour)},
		},
		{
			name: "opens on its service's return, the window counted from that return, not from the turn",
			s:    gateState{}, v: serviceView{Known: true, Ready: true, Returns: 1, LastReturn: at(60 * time.Second)}, now: 61 * time.Second,
			want: open(60*time.Second+5*time.Minute, 1),
			step: gateStep{opened: true, returnAt: at(60 * time.Second), wakeAt: at(60*time.Second + 5*time.Minute)},
		},
		{
			name: "opens on a return it saw late, and pauses at once when the service is down again",
			s:    gateState{}, v: serviceView{Known: true, Ready: false, Returns: 1, LastReturn: at(60 * time.Second)}, now: 70 * time.Second,
			want: paused(60*time.Second+5*time.Minute, 1),
			step: gateStep{opened: true, paused: true, returnAt: at(60 * time.Second), wakeAt: at(60*time.Second + 5*time.Minute)},
		},
		{
			name: "a service that never returns ends at MAX_WAIT with nothing reaped",
			s:    gateState{}, v: serviceView{Known: true}, now: time.Hour,
			want: gateState{phase: phaseEnded}, step: gateStep{ended: true, gaveUp: true},
		},
		{
			name: "keeps reaping while open, until its window ends",
			s:    open(6*time.Minute, 1), v: serviceView{Known: true, Ready: true, Returns: 1, LastReturn: at(time.Minute)}, now: 3 * time.Minute,
			want: open(6*time.Minute, 1), step: gateStep{wakeAt: at(6 * time.Minute)},
		},
		{
			name: "pauses when its service goes down, its window still running",
			s:    open(6*time.Minute, 1), v: serviceView{Known: true, Ready: false, Returns: 1, LastReturn: at(time.Minute)}, now: 3 * time.Minute,
			want: paused(6*time.Minute, 1), step: gateStep{paused: true, wakeAt: at(6 * time.Minute)},
		},
		{
			name: "a later return resumes with a fresh, full window from that return",
			s:    paused(6*time.Minute, 1), v: serviceView{Known: true, Ready: true, Returns: 2, LastReturn: at(4 * time.Minute)}, now: 4*time.Minute + time.Second,
			want: open(9*time.Minute, 2), step: gateStep{resumed: true, returnAt: at(4 * time.Minute), wakeAt: at(9 * time.Minute)},
		},
		{
			name: "a flap it only saw the end of (down and back between turns) still gets a fresh window",
			s:    open(6*time.Minute, 1), v: serviceView{Known: true, Ready: true, Returns: 2, LastReturn: at(5 * time.Minute)}, now: 5*time.Minute + time.Second,
			want: open(10*time.Minute, 2), step: gateStep{resumed: true, returnAt: at(5 * time.Minute), wakeAt: at(10 * time.Minute)},
		},
		{
			name: "its window ends during an outage: the target is done",
			s:    paused(6*time.Minute, 1), v: serviceView{Known: true, Ready: false, Returns: 1, LastReturn: at(time.Minute)}, now: 6 * time.Minute,
			want: gateState{phase: phaseEnded, seenReturns: 1, windowEnd: at(6 * time.Minute)}, step: gateStep{ended: true},
		},
		{
			name: "a return after its window ended belongs to nobody: the target stays done",
			s:    paused(6*time.Minute, 1), v: serviceView{Known: true, Ready: true, Returns: 2, LastReturn: at(7 * time.Minute)}, now: 7 * time.Minute,
			want: gateState{phase: phaseEnded, seenReturns: 2, windowEnd: at(6 * time.Minute)}, step: gateStep{ended: true},
		},
		{
			name:  "RUN_DURATION 0 keeps it open forever",
			rules: gateRules{maxWait: time.Hour, armedAt: start},
			s:     gateState{}, v: serviceView{Known: true, Ready: true, Returns: 1, LastReturn: at(time.Second)}, now: 24 * time.Hour,
			want: gateState{phase: phaseOpen, seenReturns: 1}, step: gateStep{opened: true, returnAt: at(time.Second)},
		},
		{
			name: "a service already Ready at the first step opens even if MAX_WAIT is already past",
			s:    gateState{}, v: serviceView{Known: true, Ready: true, Returns: 1, LastReturn: at(2 * time.Hour)}, now: 2 * time.Hour,
			want: open(2*time.Hour+5*time.Minute, 1),
			step: gateStep{opened: true, returnAt: at(2 * time.Hour), wakeAt: at(2*time.Hour + 5*time.Minute)},
		},
		{
			name: "a return seen exactly at its window's end ends the run",
			s:    open(6*time.Minute, 1), v: serviceView{Known: true, Ready: true, Returns: 2, LastReturn: at(6 * time.Minute)}, now: 6 * time.Minute,
			want: gateState{phase: phaseEnded, seenReturns: 2, windowEnd: at(6 * time.Minute)}, step: gateStep{ended: true},
		},
		{
			name: "an ended target never moves again",
			s:    gateState{phase: phaseEnded}, v: serviceView{Known: true, Ready: true, Returns: 5, LastReturn: at(time.Second)}, now: time.Second,
			want: gateState{phase: phaseEnded},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rules
			if tc.rules != (gateRules{}) {
				r = tc.rules
			}
			got, step := stepGate(tc.s, r, tc.v, at(tc.now))
			if got != tc.want {
				t.Errorf("state = %+v, want %+v", got, tc.want)
			}
			if step != tc.step {
				t.Errorf("step = %+v, want %+v", step, tc.step)
			}
		})
	}
}

// TestBatchGatesAreIndependent: three targets share one run; each opens on its own service's
// return and keeps its own window, and one whose service never returns holds back nobody.
func TestBatchGatesAreIndependent(t *testing.T) {
	rules := gateRules{runDuration: 5 * time.Minute, maxWait: 20 * time.Minute, armedAt: t0}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	views := map[string]serviceView{
		"early": {Known: true, Ready: true, Returns: 1, LastReturn: at(time.Minute)},
		"late":  {Known: true, Ready: true, Returns: 1, LastReturn: at(4 * time.Minute)},
		"never": {Known: true},
	}
	states := map[string]gateState{}
	check := func(now time.Duration, want map[string]gatePhase) {
		t.Helper()
		for name, v := range views {
			if v.Returns > 0 && v.LastReturn.After(at(now)) {
				v = serviceView{Known: true}
			}
			states[name], _ = stepGate(states[name], rules, v, at(now))
			if states[name].phase != want[name] {
				t.Errorf("at %s, %s is in phase %d, want %d", now, name, states[name].phase, want[name])
			}
		}
	}
	check(30*time.Second, map[string]gatePhase{"early": phaseWaiting, "late": phaseWaiting, "never": phaseWaiting})
	check(2*time.Minute, map[string]gatePhase{"early": phaseOpen, "late": phaseWaiting, "never": phaseWaiting})
	check(5*time.Minute, map[string]gatePhase{"early": phaseOpen, "late": phaseOpen, "never": phaseWaiting})
	check(6*time.Minute, map[string]gatePhase{"early": phaseEnded, "late": phaseOpen, "never": phaseWaiting})
	check(9*time.Minute, map[string]gatePhase{"early": phaseEnded, "late": phaseEnded, "never": phaseWaiting})
	check(20*time.Minute, map[string]gatePhase{"early": phaseEnded, "late": phaseEnded, "never": phaseEnded})
}

// TestPodInformerSelectorIsOneEveryDependentPasses: the batch's pod watch filters server-side
// with one selector that every target's dependents match, or falls back to the distinct
// selectors when they share no label.
func TestPodInformerSelectorIsOneEveryDependentPasses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		selectors []string
		want      []string
	}{
		{"one service's selector", []string{"app=kubernetes,role=apiserver"}, []string{"app in (kubernetes),role in (apiserver)"}},
		{"a seed's two services: the label all share, with every value", []string{"app=kubernetes,role=apiserver", "app=kubernetes,role=controller-manager", "app=machine-controller-manager"},
			[]string{"app in (kubernetes,machine-controller-manager)"}},
		{"a key one selector only asks to exist", []string{"tier", "tier=db,x=y"}, []string{"tier"}},
		{"negative requirements are left to the client-side check", []string{"app=a,env!=prod", "app=b,env notin (dev)"}, []string{"app in (a,b)"}},
		{"nothing shared: the distinct selectors", []string{"a=1", "b=2", "a=1"}, []string{"a=1", "b=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sels []labels.Selector
			for _, s := range tc.selectors {
				sel, err := labels.Parse(s)
				if err != nil {
					t.Fatal(err)
				}
				sels = append(sels, sel)
			}
			var got []string
			for _, s := range podSelectors(sels) {
				got = append(got, s.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("selectors %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("selectors %q, want %q", got, tc.want)
				}
			}
			for _, s := range sels { // soundness: a pod a target selects passes the filter
				set := labels.Set{}
				reqs, _ := s.Requirements()
				for _, r := range reqs {
					if v := r.ValuesUnsorted(); len(v) > 0 && (r.Operator() == "=" || r.Operator() == "in" || r.Operator() == "==") {
						set[r.Key()] = v[0]
					} else if r.Operator() == "exists" {
						set[r.Key()] = "x"
					}
				}
				passes := false
				for _, f := range podSelectors(sels) {
					passes = passes || f.Matches(set)
				}
				if s.Matches(set) && !passes {
					t.Errorf("a pod %v of selector %q fails the server-side filter %q", set, s, got)
				}
			}
		})
	}
}
