//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/test/monitoring"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// The monitoring test runs a coordinator of its own as a process on this machine (this
// tree's code, with its metrics; a prober whose Jobs it can break without touching the lab's
// shards) and a real Prometheus that scrapes it every second and evaluates the shipped
// alert rules every second. The rules are a test copy: the expressions are the shipped ones,
// except the last-probe threshold, which is the same formula for this coordinator's settings
// (probeJobRunDuration 20s + 2 × probeInterval 5s = 30 s instead of the defaults' 140 s) plus
// 30 s for a shard Job's pod to start on this 2-core machine while the rest of the suite runs
// (the shipped 20 s of margin is for pods that start in seconds; in make test, beside the
// storm tests, a hand-over once took 25 s and the 30 s copy fired while probing was healthy);
// every `for` is a quarter of the shipped one (1m → 15s) so the test does not wait minutes.
const (
	monitoringProbeLabel = "depwatch.io/e2e-monitoring"
	// The shipped threshold, probeJobRunDuration + 2 × probeInterval, and this test's: the same
	// formula plus the pod start allowance above.
	shippedLastProbeThreshold     = "> 140"
	testLastProbeThresholdSeconds = 60
	// The shipped alert's `for`, which testRules checks.
	shippedLastProbeFor = time.Minute
	forScale            = 4
)

// monitoringCoordinatorConfig: the weeder for the namespaces labelled
// privateCoordinatorLabel=<home> (the lab's coordinator leaves them alone) and a prober for
// those labelled monitoringProbeLabel=<home> (gardenlet's prober config, probing every 5 s,
// with the lab's timings), on the lab's Job template; the Jobs' LOG_FORMAT and backoffLimit
// are the test's to change.
func monitoringCoordinatorConfig(home, logFormat string, backoffLimit int) string {
	return fmt.Sprintf(`watchDuration: 30s
servicesAndDependantSelectors:
  upstream:
    podSelectors: [{matchLabels: {depwatch.io/e2e: dependent}}]
armWeeder: true
namespaces:
  selector: {matchLabels: {%[1]s: %[2]s}}
jobTemplate:
  namespace: depwatch
  image: %[7]s
  imagePullPolicy: Never
  hostNetwork: true
  backoffLimit: %[4]d
  ttlSecondsAfterFinished: 600
  env:
    - {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}
    - {name: KUBERNETES_SERVICE_PORT, value: "6443"}
    - {name: LOG_FORMAT, value: %[3]s}
prober:
  initialDelay: 2s
  probeTimeout: 5s
  kcmNodeMonitorGraceDuration: 20s
  namespaceSelector: {matchLabels: {%[5]s: %[2]s}}
  failedJobsHistoryLimit: 3
  probeJobRunDuration: 20s
%[6]s`, privateCoordinatorLabel, home, logFormat, backoffLimit, monitoringProbeLabel, indent(gardenletProberConfig, "  "), depwatchImage)
}

// testRules is the shipped rules file with its durations scaled down as the comment above
// says, and nothing else changed.
func testRules(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "manifests/components/monitoring/depwatch.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f monitoring.RulesFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatal(err)
	}
	replaced := 0
	for gi := range f.Groups {
		for ri := range f.Groups[gi].Rules {
			r := &f.Groups[gi].Rules[ri]
			if r.For != "" {
				d, err := time.ParseDuration(r.For)
				if err != nil {
					t.Fatalf("%s: for %q: %v", r.Alert, r.For, err)
				}
				r.For = fmt.Sprintf("%dms", (d / forScale).Milliseconds())
			}
			if r.Alert == "DepwatchProbeLastProbeTooOld" {
				if d, err := time.ParseDuration(r.For); err != nil || d != shippedLastProbeFor/forScale {
					t.Fatalf("%s: for %q, want the shipped %s scaled by %d", r.Alert, r.For, shippedLastProbeFor, forScale)
				}
				if strings.Count(r.Expr, shippedLastProbeThreshold) != 1 {
					t.Fatalf("%s: expression %q has not exactly one %q", r.Alert, r.Expr, shippedLastProbeThreshold)
				}
				r.Expr = strings.Replace(r.Expr, shippedLastProbeThreshold, fmt.Sprintf("> %d", testLastProbeThresholdSeconds), 1)
				replaced++
			}
		}
	}
	if replaced != 1 {
		t.Fatal("the rules file has no DepwatchProbeLastProbeTooOld alert")
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestMonitoringAlertsAndDashboard: a real Prometheus scrapes a coordinator and evaluates
// the shipped alert rules (scaled as testRules says) while it handles a weeder outage and a
// meltdown: the meltdown alert fires for the shoot's namespace and clears after the
// scale-up; the last-probe alert stays quiet while that namespace is probed and fires once
// its shard's Jobs fail (the Job template's LOG_FORMAT made one `depwatch probe` refuses, exit
// 2; the admission policy admits no other image), with the failing-Jobs alert; the coordinator's own alerts never fire; and
// every dashboard query has data over the test's time range.
func TestMonitoringAlertsAndDashboard(t *testing.T) {
	parallelLong(t, 3*time.Minute)
	ensureCoordinator(t)
	start := time.Now()
	home := "mon-" + rand.String(5)
	config := filepath.Join(t.TempDir(), "config.yaml")
	writeConfig := func(logFormat string, backoffLimit int) {
		if err := os.WriteFile(config, []byte(monitoringCoordinatorConfig(home, logFormat, backoffLimit)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("Logrus", 2)
	metricsPort := freePort(t)
	// No cap on weeder Jobs: the cap counts every weeder Job in the namespace, the other
	// tests' too, and this one's outage must not wait for theirs.
	startHostCoordinator(t, []string{"--config-file", config, "--metrics-bind-addr", fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"--health-bind-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--max-weeder-jobs=0"}, nil)
	prom := startPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [depwatch.rules.yaml]
scrape_configs:
  - job_name: depwatch-coordinator
    honor_labels: true
    static_configs: [{targets: ["127.0.0.1:%d"]}]
`, metricsPort), map[string]string{"depwatch.rules.yaml": testRules(t)})
	waitFor(t, time.Minute, "Prometheus to scrape the leading coordinator", func() (bool, error) {
		res, err := prom.query(`sum by (job, namespace) (depwatch_coordinator_leader) == 1`)
		return len(res) == 1, err
	})

	// A weeder outage: armed on the outage, and the return.
	wns := newNamespaceLabelled(t, "mon-weeder", map[string]string{privateCoordinatorLabel: home})
	p := newPair(t, wns)
	outage := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	p.waitArmedJob(outage, 90*time.Second)
	// A dependent in crash-loop back-off at the return, with 30 s of it left (the 40 s
	// back-off): the armed weeder restarts it long before the kubelet would, and its
	// service's time saved reaches the dashboard once the 30 s run ends.
	cl := p.waitCrashLoop(30*time.Second, 3*time.Minute)
	p.returnBeforeTheKubelet(cl)
	waitFor(t, time.Minute, "both edges' weeder actions in Prometheus", func() (bool, error) {
		res, err := prom.query(`sum(depwatch_coordinator_weeder_edge_to_action_seconds_count) >= 2`)
		return len(res) == 1, err
	})
	// The restart's time saved, per service, once the run has ended (its 30 s
	// watchDuration) and its report been read: what the dashboard's per-service panel shows.
	waitFor(t, 3*time.Minute, "the pair's service's saved back-off in Prometheus", func() (bool, error) {
		res, err := prom.query(fmt.Sprintf(`depwatch_coordinator_weeder_service_backoff_saved_seconds_total{namespace=%q,service=%q} > 0`, wns, p.svc))
		return len(res) == 1, err
	})

	// A meltdown in a probed namespace.
	s := newProbeScenario(t, "mon-probe", probeSetup{})
	mustKubectl(t, "label", "namespace", s.ns, monitoringProbeLabel+"="+home)
	t.Cleanup(func() {
		// The coordinator stops probing it before the scenario's clean-up removes its
		// Jobs, so no new Job follows them.
		_, _ = kubectl(t, "label", "namespace", s.ns, monitoringProbeLabel+"-")
		waitFor(t, 30*time.Second, "the coordinator to stop probing "+s.ns, func() (bool, error) {
			res, err := prom.query(`sum(depwatch_coordinator_probe_namespaces{state="probed"}) == 0`)
			return len(res) == 1, err
		})
	})
	selector := fmt.Sprintf("namespace=%q", s.ns)
	waitFor(t, 2*time.Minute, "the namespace's first probe in Prometheus", func() (bool, error) {
		res, err := prom.query(fmt.Sprintf(`depwatch_coordinator_probe_last_probe_timestamp_seconds{%s}`, selector))
		return len(res) == 1, err
	})
	// From here until its shard is broken the namespace is probed: the last-probe alert
	// must not fire.
	watchFrom := time.Now()
	healthy, stopWatching := context.WithCancel(context.Background())
	var lastProbeFired []time.Time
	reports := map[types.UID]probeReportSeen{} // the shard's finished probe pods, by UID
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for healthy.Err() == nil {
			if a := prom.alerts("DepwatchProbeLastProbeTooOld", "firing", selector); len(a) > 0 {
				lastProbeFired = append(lastProbeFired, time.Now())
			}
			collectProbeReports(healthy, s.ns, reports)
			select {
			case <-healthy.Done():
			case <-time.After(time.Second):
			}
		}
	}()

	s.setRenewing(false, "w1", "w2", "w3")
	for _, d := range dependents {
		s.waitReplicas(d, 0, 2*time.Minute)
	}
	down := time.Now()
	firedAt := prom.waitAlert(2*time.Minute, "DepwatchMeltdownProtectionActive", selector, true)
	a := prom.alerts("DepwatchMeltdownProtectionActive", "firing", selector)
	if len(a) != 1 || a[0].Metric["severity"] != "info" {
		t.Errorf("the meltdown alert: %s, want one, severity info, for namespace %s", describe(a), s.ns)
	}
	t.Logf("meltdown alert firing %.0fs after the dependents reached 0", firedAt.Sub(down).Seconds())
	s.setRenewing(true, "w1", "w2", "w3")
	for _, d := range dependents {
		s.waitReplicas(d, dependentReplicas, 2*time.Minute)
	}
	up := time.Now()
	clearedAt := prom.waitAlert(2*time.Minute, "DepwatchMeltdownProtectionActive", selector, false)
	t.Logf("meltdown alert cleared %.0fs after the dependents were back", clearedAt.Sub(up).Seconds())

	// At least three of the shard's Job runs (20 s each) watched, so the alert had its chances.
	if rest := time.Minute - time.Since(watchFrom); rest > 0 {
		time.Sleep(rest)
	}
	stopWatching()
	<-watched
	t.Logf("the last-probe alert was watched for %.0fs while the namespace was probed", time.Since(watchFrom).Seconds())
	collectProbeReports(context.Background(), s.ns, reports)
	t.Logf("%d probe pods reported probing %s; the longest time between two probes they reported: %s",
		len(reports), s.ns, longestProbeGap(reports).Round(time.Second))
	if len(reports) == 0 {
		t.Errorf("no finished probe pod reported probing %s while it was probed", s.ns)
	}
	// The alert may fire while the namespace is probed: on a loaded machine a shard Job's pod
	// can take longer to start than the threshold allows, and then the namespace really went
	// unprobed that long. What it must not do is fire although the coordinator had a newer
	// probe to read: a report it missed or read wrong.
	if wrong := lastProbeAlertsAgainstReports(lastProbeFired, reports); len(wrong) > 0 {
		t.Errorf("DepwatchProbeLastProbeTooOld fired for %s although a probe pod had reported a recent probe of it well before: %s", s.ns, strings.Join(wrong, "; "))
	} else if len(lastProbeFired) > 0 {
		t.Logf("the last-probe alert fired %d time(s) while probed, each after a real gap in probing (first at %s)", len(lastProbeFired), lastProbeFired[0].Format(time.TimeOnly))
	}

	// Its shard's Jobs fail from now on (the coordinator reads its config file again every 10 s).
	broken := time.Now()
	writeConfig("no-such-format", 0) // depwatch probe refuses it: exit 2, bad configuration
	prom.waitAlert(3*time.Minute, "DepwatchProbeLastProbeTooOld", selector, true)
	t.Logf("last-probe alert firing %.0fs after the shard's Jobs were broken", time.Since(broken).Seconds())
	prom.waitAlert(time.Minute, "DepwatchJobsFailing", `kind="probe"`, true)

	// The coordinator's own alerts never fired.
	res, err := prom.queryRange(`ALERTS{alertstate="firing", alertname=~"DepwatchCoordinatorDown|DepwatchNoLeader|DepwatchConfigInvalid|DepwatchProbeShardStuck"}`, start, 2*time.Second)
	if err != nil || len(res) > 0 {
		t.Errorf("alerts that should have stayed quiet fired:%s (%v)", describe(res), err)
	}

	// Every panel of the dashboard shows data for the time of the flows.
	d, err := monitoring.LoadDashboard(filepath.Join(repoRoot, "manifests/components/monitoring/depwatch-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, panel := range d.Panels {
		for _, q := range panel.Targets {
			res, err := prom.queryRange(q.Expr, start, 2*time.Second)
			if err != nil || len(res) == 0 {
				t.Errorf("dashboard panel %q: %s returned nothing over the test (%v)", panel.Title, q.Expr, err)
			}
		}
	}
	t.Logf("the flows and checks took %s", time.Since(start).Round(time.Second))
}

// probeReportSeen is one finished probe pod's report of a namespace: when the pod ended
// (its container's finish) and when it last probed the namespace (its report's end less the
// entry's age).
type probeReportSeen struct {
	finished, probed time.Time
}

// collectProbeReports adds every finished probe pod in the Jobs' namespace whose report names
// ns as probed. It runs again and again: the coordinator removes finished Jobs beyond their
// history limit, and their pods with them.
func collectProbeReports(ctx context.Context, ns string, into map[types.UID]probeReportSeen) {
	pods, err := kube.CoreV1().Pods(depwatchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, pod := range pods.Items {
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name != string(jobs.KindProbe) || cs.State.Terminated == nil {
				continue
			}
			rep, err := probe.DecodeReport(cs.State.Terminated.Message)
			if err != nil {
				continue
			}
			if e, ok := rep.Namespaces[ns]; ok && e.Last != probe.ResultNotProbed {
				into[pod.UID] = probeReportSeen{finished: cs.State.Terminated.FinishedAt.Time, probed: rep.End.Add(-e.Ago)}
			}
		}
	}
}

// longestProbeGap is the longest time between two consecutive probes the reports name.
func longestProbeGap(reports map[types.UID]probeReportSeen) time.Duration {
	var at []time.Time
	for _, r := range reports {
		at = append(at, r.probed)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var longest time.Duration
	for i := 1; i < len(at); i++ {
		longest = max(longest, at[i].Sub(at[i-1]))
	}
	return longest
}

// lastProbeAlertsAgainstReports names each moment the last-probe alert was firing although a
// probe pod had already reported a newer probe than the alert implies. Firing at f means the
// expression held over the whole `for` before f, so at f−for the coordinator's last probe
// was older than f−for−threshold. A report that probed the namespace after that, from a pod
// that ended before f−for−for (the second `for` is the time allowed for the pod's end to
// reach the coordinator through the API server and its informer), was missed.
func lastProbeAlertsAgainstReports(fired []time.Time, reports map[types.UID]probeReportSeen) []string {
	threshold := testLastProbeThresholdSeconds * time.Second
	forDur := shippedLastProbeFor / forScale
	var wrong []string
	for _, f := range fired {
		for _, r := range reports {
			// derived bound: the alert's own threshold and `for`, as the comment above says.
			if r.probed.After(f.Add(-threshold-forDur)) && r.finished.Before(f.Add(-2*forDur)) {
				wrong = append(wrong, fmt.Sprintf("firing at %s, a pod that ended at %s had probed at %s",
					f.Format(time.TimeOnly), r.finished.Format(time.TimeOnly), r.probed.Format(time.TimeOnly)))
				break
			}
		}
	}
	return wrong
}

// indent puts prefix before every line of doc that is not empty.
func indent(doc, prefix string) string {
	lines := strings.SplitAfter(doc, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
