package reaper

import "time"

// The gate of a run's service (START_WHEN_READY, or one target of TARGETS) and its window
// (RUN_DURATION), as one pure decision over what is known of the service: every target of a
// gated run (batch.turn, over the shared caches; START_WHEN_READY is a batch of one) steps it. A run reaps nothing until its service is Ready; its window
// counts from that return; while its service is down again it pauses; every later return gets
// a fresh, full window; the window keeps running during an outage; MAX_WAIT counts from the
// run's start. A run without START_WHEN_READY is one whose service is Ready from the start.
// No target's state depends on another's.

// gatePhase is where a target stands.
type gatePhase int

const (
	phaseWaiting gatePhase = iota // armed: its service has not been Ready since the run began
	phaseOpen                     // reaping: its service is Ready, its window runs
	phasePaused                   // its service is down again; its window keeps running
	phaseEnded                    // its window elapsed, or MAX_WAIT did before it opened
)

// serviceView is what is known of a run's service. Returns are facts recorded when they are
// seen (serviceTracker, seen): a return that came and went before the target's turn still
// counts, however late the queue gets there.
type serviceView struct {
	Known      bool      // the slices' cache has synced: Ready is meaningful
	Ready      bool      // Ready now, as the service's readyWhen says (podstate.ReadyWhen)
	Returns    int       // times it became Ready since the run began (the first sight counts when Ready)
	LastReturn time.Time // when the last of those was seen
}

// gateState is one run's (one target's) gate.
type gateState struct {
	phase       gatePhase
	seenReturns int       // the service's returns this gate has acted on
	windowEnd   time.Time // phaseOpen, phasePaused: when the window ends; zero: never (RUN_DURATION 0)
}

// gateRules are the settings every target of a run shares.
type gateRules struct {
	runDuration time.Duration // 0: forever
	maxWait     time.Duration
	armedAt     time.Time // the run's start
}

// gateStep is what changed in one step, for the logs and the reaping.
type gateStep struct {
	opened   bool      // first return: reaping starts (a cycle now)
	resumed  bool      // a later return: a fresh window, the cooldown afresh, a cycle now
	paused   bool      // the service went down while reaping
	ended    bool      // the window elapsed (or MAX_WAIT, with gaveUp)
	gaveUp   bool      // MAX_WAIT passed before the service was ever Ready
	returnAt time.Time // opened, resumed: the return's time
	wakeAt   time.Time // when to look again without news (window end, MAX_WAIT); zero: on news only
}

// stepGate moves s by what the service's view says at now.
func stepGate(s gateState, rules gateRules, v serviceView, now time.Time) (gateState, gateStep) {
	var st gateStep
	if s.phase == phaseEnded {
		return s, st
	}
	fresh := v.Known && v.Returns > s.seenReturns
	switch {
	case s.phase == phaseWaiting && fresh:
		s.seenReturns = v.Returns
		s.windowEnd = windowFrom(v.LastReturn, rules.runDuration)
		s.phase = phaseOpen
		st.opened, st.returnAt = true, v.LastReturn
	case s.phase == phaseWaiting:
		giveUp := rules.armedAt.Add(rules.maxWait)
		if !now.Before(giveUp) {
			s.phase = phaseEnded
			st.ended, st.gaveUp = true, true
			return s, st
		}
		st.wakeAt = giveUp
		return s, st
	case fresh:
		s.seenReturns = v.Returns
		// A return before the window ended is a recovery of its own with a full window; one
		// after it belongs to nobody: the target's run ended with its window.
		if s.windowEnd.IsZero() || v.LastReturn.Before(s.windowEnd) {
			s.windowEnd = windowFrom(v.LastReturn, rules.runDuration)
			st.resumed, st.returnAt = true, v.LastReturn
		}
	}
	if !s.windowEnd.IsZero() && !now.Before(s.windowEnd) {
		s.phase = phaseEnded
		st.ended = true
		return s, st
	}
	st.wakeAt = s.windowEnd
	switch {
	case v.Ready:
		s.phase = phaseOpen
	case s.phase == phaseOpen:
		s.phase = phasePaused
		st.paused = true
	}
	return s, st
}

func windowFrom(at time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return at.Add(d)
}

// reaping says whether the target reaps its dependents now.
func (s gateState) reaping() bool { return s.phase == phaseOpen }
