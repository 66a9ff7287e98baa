//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
)

// Shared fixtures: the kubelet's crash-loop back-off as a test can rely on it, and the logs of
// the Jobs depwatch runs. (The upstream/dependent pair is in scenario_test.go.)
//
// A test that needs a dependent still in CrashLoopBackOff when its upstream returns races the
// kubelet: once the back-off ends, the kubelet restarts the dependent itself, it becomes Ready,
// and nothing is left for a weeder to reap. So such a test waits, with
// waitForBackOffAtLeast, until the dependent's back-off has more time ahead than everything
// the test does before the weeder acts, with a wide margin; counting restarts alone says
// nothing about how much of the current back-off is left.

// maxKubeletBackoff caps the kubelet's crash-loop back-off. hack/cluster-up.sh sets no
// crashLoopBackOff.maxContainerRestartPeriod in its KubeletConfiguration, so this is the
// kubelet's default.
const maxKubeletBackoff = 5 * time.Minute

// kubeletBackoff is the kubelet's crash-loop back-off for a container that has crashed and
// shows restarts restarts: measured on v1.36, the first crash is restarted at once, the
// second waits 10 s, and each later one twice as long as the one before, capped at
// maxKubeletBackoff. The kubelet counts it from the crash (the termination's finishedAt).
func kubeletBackoff(restarts int32) time.Duration {
	if restarts == 0 {
		return 0
	}
	d := 10 * time.Second
	for i := int32(1); i < restarts; i++ {
		d *= 2
		if d >= maxKubeletBackoff {
			return maxKubeletBackoff
		}
	}
	return d
}

var backoffMessage = regexp.MustCompile(`back-off (\S+) restarting`)

// crashLoop is a pod whose container waits out the kubelet's crash-loop back-off.
type crashLoop struct {
	pod       corev1.Pod
	container string
	restarts  int32
	backoff   time.Duration
	// kubeletRestart is the earliest moment the kubelet restarts the container on its own:
	// the last crash plus the back-off (finishedAt has whole seconds and is rounded down, and
	// the kubelet acts at the end of the back-off or later, so never earlier than this).
	kubeletRestart time.Time
}

// ahead is how much of the back-off is left.
func (c crashLoop) ahead() time.Duration { return time.Until(c.kubeletRestart) }

// backOffOf reads the pod's crash-loop back-off from its status. The kubelet (v1.36) shows
// waiting/CrashLoopBackOff (with the back-off in its message) only when it re-syncs the pod,
// mostly at the end of the back-off; in between the container shows as terminated, and the
// back-off follows from the restart count.
func backOffOf(pod corev1.Pod) (crashLoop, bool) {
	if pod.DeletionTimestamp != nil {
		return crashLoop{}, false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		var backoff time.Duration
		var finished time.Time
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && cs.LastTerminationState.Terminated != nil:
			finished = cs.LastTerminationState.Terminated.FinishedAt.Time
			backoff = kubeletBackoff(cs.RestartCount)
			if m := backoffMessage.FindStringSubmatch(cs.State.Waiting.Message); m != nil {
				if d, err := time.ParseDuration(m[1]); err == nil {
					backoff = d
				}
			}
		case cs.State.Terminated != nil:
			finished = cs.State.Terminated.FinishedAt.Time
			backoff = kubeletBackoff(cs.RestartCount)
		default:
			continue
		}
		if backoff == 0 || finished.IsZero() {
			continue
		}
		return crashLoop{pod: pod, container: cs.Name, restarts: cs.RestartCount, backoff: backoff, kubeletRestart: finished.Add(backoff)}, true
	}
	return crashLoop{}, false
}

// podsOf names the one pod of a workload: its namespace and a label selector.
type podsOf struct{ ns, selector string }

// waitForBackOffAtLeast waits until the pod of every workload is in crash-loop back-off with
// at least d of it ahead, all at the same moment, and returns them in order: from then on, for
// d, no kubelet restarts any of them. A back-off only grows (10 s doubling, capped at
// maxKubeletBackoff), so the wait ends once one is long enough and was caught early enough:
// reaching a back-off B takes about B of crash-looping (plus the pod's start), and timeout
// must allow for it.
func waitForBackOffAtLeast(t *testing.T, d, timeout time.Duration, workloads ...podsOf) []crashLoop {
	t.Helper()
	found := waitForBackOffs(t, d, timeout, len(workloads), workloads)
	for _, cl := range found {
		logCrashLoop(t, cl)
	}
	return found
}

// waitForBackOffOfMost waits until the pods of at least half the workloads (rounded up) are in
// crash-loop back-off with at least d of it ahead at the same moment, and returns them in
// order, zero entries (judged reports false) for the others. On a loaded machine the crash
// loops of many pods drift apart (a container takes tens of seconds to start, the kubelet
// restarts late), and a moment when all of eight or twenty have d ahead may not come for many
// minutes. A test judges the ones that were waiting: no kubelet restarts those before depwatch
// acts; the others may be restarted by either, and are only logged.
func waitForBackOffOfMost(t *testing.T, d, timeout time.Duration, workloads ...podsOf) []crashLoop {
	t.Helper()
	found := waitForBackOffs(t, d, timeout, (len(workloads)+1)/2, workloads)
	for i, cl := range found {
		if cl.judged() {
			logCrashLoop(t, cl)
		} else {
			t.Logf("%s/%s: not in a back-off with %s ahead at that moment; its restart is not judged", workloads[i].ns, workloads[i].selector, d)
		}
	}
	return found
}

// judged tells whether the crash loop was found (not a zero entry of waitForBackOffOfMost).
func (c crashLoop) judged() bool { return c.container != "" }

// waitForAnyBackOffAtLeast waits until the pod of one of the workloads is in crash-loop
// back-off with at least d of it ahead, and returns it and its workload. Several dependents
// whose crash loops started at different times leave no long gap in which none of them has
// that much ahead, even once all of them wait the kubelet's longest back-off.
func waitForAnyBackOffAtLeast(t *testing.T, d, timeout time.Duration, workloads ...podsOf) (crashLoop, podsOf) {
	t.Helper()
	found := waitForBackOffs(t, d, timeout, 1, workloads)
	for i, cl := range found {
		if cl.container != "" {
			logCrashLoop(t, cl)
			return cl, workloads[i]
		}
	}
	t.Fatalf("waiting for %s of back-off: no crash loop among %v", d, workloads) // not reached: waitForBackOffs fails first
	return crashLoop{}, podsOf{}
}

func logCrashLoop(t *testing.T, cl crashLoop) {
	t.Helper()
	t.Logf("pod %s/%s: %d restarts, back-off %s; the kubelet restarts it on its own at %s (in %s) or later",
		cl.pod.Namespace, cl.pod.Name, cl.restarts, cl.backoff, clock(cl.kubeletRestart), cl.ahead().Round(100*time.Millisecond))
}

// waitForBackOffs waits until at least want of the workloads' pods are in crash-loop
// back-off with d or more of it ahead at the same moment; the others' entries are zero.
func waitForBackOffs(t *testing.T, d, timeout time.Duration, want int, workloads []podsOf) []crashLoop {
	t.Helper()
	if d >= maxKubeletBackoff {
		t.Fatalf("waiting for %s of back-off: the kubelet's back-off never exceeds %s", d, maxKubeletBackoff)
	}
	selectors := map[string]bool{}
	for _, w := range workloads {
		selectors[w.selector] = true
	}
	var found []crashLoop
	var short []string
	what := fmt.Sprintf("%d of %d dependent(s) in crash-loop back-off with at least %s of it ahead", want, len(workloads), d)
	waitFor(t, timeout, what, func() (bool, error) {
		// One list per selector across namespaces: many workloads, polled often.
		pods := map[podsOf][]corev1.Pod{}
		for sel := range selectors {
			list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return false, err
			}
			for _, pod := range list.Items {
				if pod.DeletionTimestamp == nil {
					k := podsOf{pod.Namespace, sel}
					pods[k] = append(pods[k], pod)
				}
			}
		}
		found = make([]crashLoop, len(workloads))
		short = short[:0]
		for i, w := range workloads {
			if len(pods[w]) != 1 {
				short = append(short, fmt.Sprintf("%s/%s: %d pods", w.ns, w.selector, len(pods[w])))
				continue
			}
			cl, ok := backOffOf(pods[w][0])
			if !ok || cl.ahead() < d {
				short = append(short, fmt.Sprintf("%s/%s: back-off %s, %s ahead", w.ns, w.selector, cl.backoff, cl.ahead().Round(time.Second)))
				continue
			}
			found[i] = cl
		}
		if len(workloads)-len(short) < want {
			return false, fmt.Errorf("not yet: %s", strings.Join(short[:min(len(short), 5)], "; "))
		}
		return true, nil
	})
	return found
}

// requireBackOffAhead fails the test, saying why, when less than d of the dependent's
// back-off is left: the steps since the wait took longer than planned (a slow machine), and
// the kubelet could restart the dependent before depwatch does, which would prove nothing.
func requireBackOffAhead(t *testing.T, cl crashLoop, d time.Duration, before string) {
	t.Helper()
	if left := cl.ahead(); left < d {
		t.Fatalf("before %s, only %s of pod %s/%s's back-off is left (the kubelet restarts it at %s), want %s or more: "+
			"the test's own steps took too long, the kubelet would race depwatch; not a product failure",
			before, left.Round(100*time.Millisecond), cl.pod.Namespace, cl.pod.Name, clock(cl.kubeletRestart), d)
	}
}

// dependent is the pair's dependent workload, for waitForBackOffAtLeast.
func (p *pair) dependent() podsOf { return podsOf{p.ns, "app=" + dependentName} }

// waitCrashLoop waits until the pair's dependent is in crash-loop back-off with at least
// ahead of it left.
func (p *pair) waitCrashLoop(ahead, timeout time.Duration) crashLoop {
	p.t.Helper()
	return waitForBackOffAtLeast(p.t, ahead, timeout, p.dependent())[0]
}

// waitReapedEvent waits for the Reaped Event a weeder records on the pod it deleted.
func waitReapedEvent(t *testing.T, ns, pod string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("a Reaped event on pod %s/%s", ns, pod), func() (bool, error) {
		return len(eventsFor(t, ns, pod)["Reaped"]) > 0, nil
	})
}

// waitJobLogLine waits until the Job's log (`kubectl logs job/<name>`, as a user reads it) has
// a JSON line whose fields have the given values, and returns the log and its lines.
func waitJobLogLine(t *testing.T, ns, job string, want map[string]string, timeout time.Duration) (string, []logLine) {
	t.Helper()
	var out string
	var lines []logLine
	waitFor(t, timeout, fmt.Sprintf("a line with %v in the log of Job %s/%s", want, ns, job), func() (bool, error) {
		var err error
		out, err = kubectl(t, "-n", ns, "logs", "job/"+job)
		lines = parseLogLines(out)
		_, ok := findLine(lines, want)
		return ok && err == nil, err
	})
	return out, lines
}

// restartedByWeeder checks what a weeder is for, with no bound the machine's load can break:
// the crash-looping pod cl was deleted by depwatch's weeder (the Reaped Event its reaper
// records), not before its upstream came back and before the kubelet's own restart of it was
// due, and a replacement became Ready. Every moment compared is one the cluster recorded
// (Event, pod conditions, container finish), never when the test happened to look. How soon
// the replacement is Ready is the figure it returns for the log, not a verdict: a new pod's
// start is the node's speed (tens of seconds for twenty at once on a loaded machine), not
// depwatch's.
//
// One race is the test's, not depwatch's: an upstream that takes most of the dependent's
// back-off to start (48 s for a pod on a loaded machine) comes back so late that the kubelet's
// restart is due before any weeder could see the return. When the kubelet restarted the pod
// first, or depwatch deleted it only after the restart was due, the weeder's own log decides:
// a weeder that saw the return before that moment and did not act in time is an error; one
// that saw it only after is not judged, and the test says so.
func (p *pair) restartedByWeeder(cl crashLoop) (corev1.Pod, time.Duration) {
	p.t.Helper()
	if kubeletAt, ok := p.kubeletRestartedFirst(cl); ok {
		key := p.serviceKey()
		saw, found, skipped := weederSawReturn(p.t, p.jobsNamespace(), key, cl.pod.Name, cl.kubeletRestart.Add(-cl.backoff))
		switch {
		case skipped:
			p.t.Logf("%s: not judged: a weeder saw the return at %s and left pod %s to the kubelet, whose restart was due sooner than its BACKOFF_FLOOR (it came at %s)",
				p.ns, clock(saw), cl.pod.Name, clock(kubeletAt))
		case !found:
			p.t.Errorf("%s: the kubelet restarted pod %s at %s and no depwatch weeder deleted it; no weeder Job's log says it saw %s come back",
				p.ns, cl.pod.Name, clock(kubeletAt), key)
		case saw.Truncate(time.Second).Before(kubeletAt):
			p.t.Errorf("%s: a weeder saw %s come back at %s, before the kubelet's restart of pod %s at %s, and did not delete the pod",
				p.ns, key, clock(saw), cl.pod.Name, clock(kubeletAt))
		default:
			p.t.Logf("%s: not judged: the upstream came back so late that the kubelet restarted pod %s at %s, before a weeder saw the return at %s",
				p.ns, cl.pod.Name, clock(kubeletAt), clock(saw))
		}
		ready, _ := p.waitDependentReady(minWait, "")
		return ready, readySince(ready).Sub(p.upstreamReadySince())
	}
	reaped := reapedBy(p.t, p.ns, cl.pod.Name)
	upAt := p.upstreamReadySince()
	switch {
	case reaped == nil:
		p.t.Errorf("%s: pod %s has no Reaped Event from %s: depwatch did not delete it", p.ns, cl.pod.Name, reaperComponent)
	case reaped.FirstTimestamp.Time.Before(upAt):
		// The kubelet keeps only a pod's last Ready transition: an upstream whose readiness
		// flapped just after it started says a later moment than its return. The reap is early
		// unless the upstream's container had started by then and the weeder's log saw the
		// service Ready, after that start, by the reap's second.
		reapedAt, started := reaped.FirstTimestamp.Time, p.upstreamStarted()
		saw, found, _ := weederSawReturn(p.t, p.jobsNamespace(), p.serviceKey(), cl.pod.Name, started.Truncate(time.Second))
		if !started.IsZero() && !reapedAt.Before(started.Truncate(time.Second)) && found && !reapedAt.Before(saw.Truncate(time.Second)) {
			p.t.Logf("%s: the upstream's Ready condition changed at %s, after pod %s was reaped at %s: its readiness flapped; a weeder saw it Ready at %s, its container running since %s",
				p.ns, clock(upAt), cl.pod.Name, clock(reapedAt), clock(saw), clock(started))
			break
		}
		p.t.Errorf("%s: pod %s was reaped at %s, before its upstream was Ready again at %s: a weeder must wait for the return",
			p.ns, cl.pod.Name, clock(reaped.FirstTimestamp.Time), clock(upAt))
	case !reaped.FirstTimestamp.Time.Before(cl.kubeletRestart):
		// The kubelet was late too (it restarts at the back-off's end or later). Whether the
		// weeder could have acted before the back-off's end is the weeder's log's to say.
		saw, found, _ := weederSawReturn(p.t, p.jobsNamespace(), p.serviceKey(), cl.pod.Name, cl.kubeletRestart.Add(-cl.backoff))
		if found && !saw.Truncate(time.Second).Before(cl.kubeletRestart) {
			p.t.Logf("%s: not judged: the upstream came back so late that a weeder saw the return at %s, after the kubelet's restart of pod %s was due at %s (it reaped at %s)",
				p.ns, clock(saw), cl.pod.Name, clock(cl.kubeletRestart), clock(reaped.FirstTimestamp.Time))
			break
		}
		p.t.Errorf("%s: pod %s was reaped at %s, not before the kubelet's own restart of it at %s, although a weeder saw the return at %s: the weeder did not help",
			p.ns, cl.pod.Name, clock(reaped.FirstTimestamp.Time), clock(cl.kubeletRestart), clock(saw))
	}
	if reaped != nil {
		p.checkSavedBackOff(cl, reaped.Message)
	}
	ready, _ := p.waitDependentReady(minWait, cl.pod.UID)
	return ready, readySince(ready).Sub(upAt)
}

// savedBackOff reads the back-off a Reaped Event says its restart saved, and when the kubelet
// would have restarted the pod.
var savedBackOff = regexp.MustCompile(`It saved about (\d+)s of back-off \(the kubelet would have restarted it at (\S+)\)`)

// checkSavedBackOff: the weeder's Reaped Event says the back-off its restart saved, read from
// the same status the test read: the kubelet's restart it names is the one the test computed,
// and what it saved is at most the whole back-off.
func (p *pair) checkSavedBackOff(cl crashLoop, message string) {
	p.t.Helper()
	m := savedBackOff.FindStringSubmatch(message)
	if m == nil {
		p.t.Errorf("%s: the Reaped Event of pod %s does not say the back-off it saved: %q", p.ns, cl.pod.Name, message)
		return
	}
	saved, _ := time.ParseDuration(m[1] + "s")
	until, err := time.Parse(time.RFC3339, strings.TrimSuffix(m[2], "."))
	switch {
	case err != nil:
		p.t.Errorf("%s: the Reaped Event's restart time %q: %v", p.ns, m[2], err)
	// derived bound: both are the container's last finish plus its back-off, from the same
	// status; the Event has whole seconds.
	case until.Sub(cl.kubeletRestart).Abs() > time.Second:
		p.t.Errorf("%s: the Reaped Event says the kubelet would have restarted pod %s at %s; its status said %s", p.ns, cl.pod.Name, clock(until), clock(cl.kubeletRestart))
	case saved > cl.backoff:
		p.t.Errorf("%s: the Reaped Event says the restart saved %s of back-off, more than the whole back-off %s", p.ns, saved, cl.backoff)
	default:
		p.t.Logf("%s: the weeder's restart saved about %s of the %s back-off", p.ns, saved, cl.backoff)
	}
}

// kubeletRestartedFirst waits until depwatch deleted the crash-looping pod (a Reaped Event on
// it) or the kubelet restarted its container, and reports the kubelet's restart and when it
// came (the restarted container's start, as the kubelet recorded it) in the second case.
func (p *pair) kubeletRestartedFirst(cl crashLoop) (time.Time, bool) {
	p.t.Helper()
	var kubeletAt time.Time
	waitFor(p.t, minWait, fmt.Sprintf("pod %s/%s deleted by depwatch or restarted by the kubelet", p.ns, cl.pod.Name), func() (bool, error) {
		if len(eventsFor(p.t, p.ns, cl.pod.Name)["Reaped"]) > 0 {
			return true, nil
		}
		pod, err := kube.CoreV1().Pods(p.ns).Get(context.Background(), cl.pod.Name, metav1.GetOptions{})
		if err != nil || pod.UID != cl.pod.UID || pod.DeletionTimestamp != nil {
			return false, nil // deleted: its Reaped Event, if depwatch deleted it, is written behind
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name != cl.container || cs.RestartCount <= cl.restarts {
				continue
			}
			switch {
			case cs.State.Running != nil:
				kubeletAt = cs.State.Running.StartedAt.Time
			case cs.LastTerminationState.Terminated != nil:
				kubeletAt = cs.LastTerminationState.Terminated.StartedAt.Time
			}
			return !kubeletAt.IsZero(), nil
		}
		return false, nil
	})
	return kubeletAt, !kubeletAt.IsZero()
}

// weederSawReturn is the first moment after `after` at which one of the weeder Jobs in ns
// that covers the service key (namespace/name) logged seeing it Ready: the gate's "reaping
// starts now" line (its ready_at) or a paused run's "reaping resumes" line (the line's time);
// and whether one of them left the pod to the kubelet on purpose, its restart being due
// sooner than the Job's BACKOFF_FLOOR (a backoff-skipped line for the pod).
func weederSawReturn(t *testing.T, ns, key, pod string, after time.Time) (time.Time, bool, bool) {
	t.Helper()
	list, err := kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: jobs.LabelKind + "=" + string(jobs.KindWeeder)})
	if err != nil {
		t.Fatalf("listing the weeder Jobs in %s: %v", ns, err)
	}
	var first time.Time
	skipped := false
	for _, j := range list.Items {
		if !slices.Contains(jobs.ReadFacts(&j).Covers(), key) {
			continue
		}
		out, _ := kubectl(t, "-n", ns, "logs", "job/"+j.Name)
		for _, l := range parseLogLines(out) {
			if l.str("pod") == pod && l.str("action") == reaper.ActionBackOffSkipped {
				skipped = true
			}
			if l.str("service") != key {
				continue
			}
			var at time.Time
			switch msg := l.str("msg"); {
			case strings.Contains(msg, "reaping starts now"):
				at, _ = time.Parse(time.RFC3339Nano, l.str("ready_at"))
			case strings.Contains(msg, "reaping resumes"):
				at, _ = time.Parse(time.RFC3339, l.str("time"))
			}
			if !at.IsZero() && !at.Before(after) && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
	}
	return first, !first.IsZero(), skipped
}

// reaperComponent is the source of the Events depwatch's reaper records (reaper/act.go).
const reaperComponent = "depwatch-reaper"

// reapedBy waits for the Reaped Event depwatch's reaper records on the pod it deleted and
// returns it; nil when the pod has Reaped Events from other sources only (none from depwatch).
func reapedBy(t *testing.T, ns, pod string) *corev1.Event {
	t.Helper()
	waitReapedEvent(t, ns, pod, time.Minute) // Events are written behind the deletes
	for _, e := range eventsFor(t, ns, pod)["Reaped"] {
		if e.Source.Component == reaperComponent {
			return &e
		}
	}
	return nil
}

// readySince is when the pod last became Ready, as its kubelet recorded it (whole seconds,
// rounded down).
func readySince(pod corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// upstreamReadySince is when the pair's upstream came back: the moment its Ready pod became
// Ready, as the kubelet recorded it (the Service's endpoint turns ready just after). A pod
// whose readiness flaps just after it starts (seen on a loaded node, with no probe failing)
// is waited for, and then says only its last transition (upstreamStarted is the floor).
func (p *pair) upstreamReadySince() time.Time {
	p.t.Helper()
	var since time.Time
	waitFor(p.t, minWait, p.upstreamNamespace()+": a Ready upstream pod", func() (bool, error) {
		since = time.Time{}
		for _, pod := range p.upstreamPods() {
			if at := readySince(pod); at.After(since) {
				since = at
			}
		}
		return !since.IsZero(), nil
	})
	return since
}

// upstreamStarted is when the container of the pair's newest upstream pod started: its
// Service cannot have been Ready before.
func (p *pair) upstreamStarted() time.Time {
	p.t.Helper()
	var started time.Time
	for _, pod := range p.upstreamPods() {
		for _, cs := range pod.Status.ContainerStatuses {
			if r := cs.State.Running; r != nil && r.StartedAt.After(started) {
				started = r.StartedAt.Time
			}
		}
	}
	return started
}

// upstreamPods are the pair's upstream pods that are not being deleted.
func (p *pair) upstreamPods() []corev1.Pod {
	p.t.Helper()
	list, err := kube.CoreV1().Pods(p.upstreamNamespace()).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + upstreamName})
	if err != nil {
		p.t.Fatalf("listing the upstream pods of %s: %v", p.upstreamNamespace(), err)
	}
	var out []corev1.Pod
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil {
			out = append(out, pod)
		}
	}
	return out
}
