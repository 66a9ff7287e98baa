package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/jobs"
)

// configMapDir lays a config file out as the kubelet mounts a ConfigMap key:
// config.yaml → ..data/config.yaml, ..data → ..<timestamp>/, and an update swaps ..data
// atomically to a new directory and removes the old one.
type configMapDir struct {
	t   *testing.T
	dir string
	gen int
	cur string
}

func newConfigMapDir(t *testing.T, content string) *configMapDir {
	t.Helper()
	d := &configMapDir{t: t, dir: t.TempDir()}
	d.update(content)
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), filepath.Join(d.dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *configMapDir) path() string { return filepath.Join(d.dir, "config.yaml") }

// update writes content the kubelet's way (AtomicWriter): a new timestamped directory, a
// temporary symlink to it renamed over ..data, then the old directory removed.
func (d *configMapDir) update(content string) {
	d.t.Helper()
	d.gen++
	ts := fmt.Sprintf("..2026_05_01_10_00_%02d.%d", d.gen, 1000+d.gen)
	must := func(err error) {
		d.t.Helper()
		if err != nil {
			d.t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(d.dir, ts), 0o755))
	must(os.WriteFile(filepath.Join(d.dir, ts, "config.yaml"), []byte(content), 0o644))
	must(os.Symlink(ts, filepath.Join(d.dir, "..data_tmp")))
	must(os.Rename(filepath.Join(d.dir, "..data_tmp"), filepath.Join(d.dir, "..data")))
	if d.cur != "" {
		must(os.RemoveAll(filepath.Join(d.dir, d.cur)))
	}
	d.cur = ts
}

// harness: a coordinator on a fake clientset, with its clock in hand.
type harness struct {
	t      *testing.T
	c      *Coordinator
	client *fake.Clientset
	now    time.Time
}

func newHarness(t *testing.T, cfgYAML string) *harness {
	t.Helper()
	cfg, err := ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	h := &harness{t: t, client: fake.NewClientset(), now: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	c, err := New(Deps{
		Client:   h.client,
		Config:   cfg,
		Log:      log,
		Metrics:  NewMetrics("test"),
		Template: jobs.Template{Namespace: "depwatch", Image: "localhost/depwatch:dev"},
		Recorder: record.NewFakeRecorder(100),
		Now:      func() time.Time { return h.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

// reloadHarness is the coordinator with its config file mounted as a ConfigMap and the
// coordinator's log captured.
type reloadHarness struct {
	*harness
	file *configMapDir
	logs *logtest.Hook
}

func newReloadHarness(t *testing.T, cfgYAML string) *reloadHarness {
	t.Helper()
	h := newHarness(t, cfgYAML)
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	h.c.log = log
	file := newConfigMapDir(t, cfgYAML)
	h.c.opts.ConfigFile = file.path()
	h.c.synced.Store(true)
	rh := &reloadHarness{harness: h, file: file, logs: hook}
	rh.check() // the first read: the same content as at start
	return rh
}

func (h *reloadHarness) check() { h.c.checkConfig(context.Background(), h.file.path()) }

// write updates the file and lets the coordinator read it once.
func (h *reloadHarness) write(content string) {
	h.t.Helper()
	h.file.update(content)
	h.check()
}

func (h *reloadHarness) readyz() (int, string) {
	rec := httptest.NewRecorder()
	h.c.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// lastEntry is the last log entry at level, nil if none.
func (h *reloadHarness) lastEntry(level logrus.Level) *logrus.Entry {
	entries := h.logs.AllEntries()
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Level == level {
			return entries[i]
		}
	}
	return nil
}

type configMetrics struct{ valid, restart, success, failure, restartRequired float64 }

func (h *reloadHarness) metrics() configMetrics {
	m := h.c.metrics
	return configMetrics{
		valid: value(m.ConfigValid), restart: value(m.ConfigRestartRequired),
		success:         value(m.ConfigReloads.WithLabelValues(ReloadSuccess)),
		failure:         value(m.ConfigReloads.WithLabelValues(ReloadFailure)),
		restartRequired: value(m.ConfigReloads.WithLabelValues(ReloadRestartRequired)),
	}
}

// withWatch is testConfig with another watchDuration.
func withWatch(d string) string {
	return strings.Replace(testConfig, "watchDuration: 3m", "watchDuration: "+d, 1)
}

const invalidConfig = `
watchDuration: -1m
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors: [{}]
`

func TestConfigChangesNameEachChangedField(t *testing.T) {
	cases := []struct {
		name string
		next string
		want []string
	}{
		{"same content", testConfig, nil},
		{"comments, order and spelling of a duration do not count", `
# reordered, with a comment
servicesAndDependantSelectors:
  kube-apiserver:
    podSelectors:
      - matchLabels: {role: controller-manager, app: kubernetes}
      - matchLabels: {app: machine-controller-manager}
  etcd-main-client:
    podSelectors: [{matchLabels: {app: kubernetes, role: apiserver}}]
watchDuration: 180s
`, nil},
		{"a top-level value", withWatch("7m"), []string{"watchDuration"}},
		{"a new top-level field", testConfig + "armWeeder: false\n", []string{"armWeeder"}},
		{"one service's selectors", strings.Replace(testConfig, "role: apiserver", "role: api", 1), []string{"servicesAndDependantSelectors.etcd-main-client"}},
		{"a service removed", `
watchDuration: 3m
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors: [{matchLabels: {app: kubernetes, role: apiserver}}]
`, []string{"servicesAndDependantSelectors.kube-apiserver"}},
		{"jobTemplate fields", testConfig + "jobTemplate: {backoffLimit: 4, env: [{name: X, value: one}]}\n", []string{"jobTemplate.backoffLimit", "jobTemplate.env"}},
		{"namespaces", testConfig + "namespaces: {names: [a]}\n", []string{"namespaces"}},
	}
	old, err := ParseConfig([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, err := ParseConfig([]byte(tc.next))
			if err != nil {
				t.Fatal(err)
			}
			if got := ConfigChanges(old, next); !slices.Equal(got, tc.want) {
				t.Errorf("ConfigChanges = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRestartReasonsOnlyForWhatTheInformersWereBuiltFor(t *testing.T) {
	prober := probeOnlyConfig
	cases := []struct {
		name     string
		base     string
		next     string
		flag     bool
		wantIn   []string // each must appear in one reason; none: live
		wantNone bool
	}{
		{"hot: durations, arming, selectors of a known service", testConfig, withWatch("9m") + "armWeeder: false\ngracePeriod: 5s\n", false, nil, true},
		{"hot: a service removed", testConfig, "servicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{matchLabels: {a: b}}]}}\n", false, nil, true},
		{"hot: namespaces.names", testConfig, testConfig + "namespaces: {names: [a, b]}\n", false, nil, true},
		{"hot: another namespace selector where one was set at start", testConfig + "namespaces: {selector: {matchLabels: {a: b}}}\n", testConfig + "namespaces: {selector: {matchLabels: {a: c}}}\n", false, nil, true},
		{"hot: the namespace selector dropped", testConfig + "namespaces: {selector: {matchLabels: {a: b}}}\n", testConfig, false, nil, true},
		{"hot: the jobTemplate but its namespace", testConfig, testConfig + "jobTemplate: {image: x:1, backoffLimit: 1}\n", false, nil, true},
		{"hot: prober interval and secret", prober, strings.Replace(strings.Replace(prober, "probeInterval: 10s", "probeInterval: 20s", 1), "shoot-access", "other", 1), false, nil, true},
		{"hot: useEndpoints when the flag forces it anyway", testConfig, testConfig + "useEndpoints: true\n", true, nil, true},
		{"restart: a new service", testConfig, testConfig + "  kube-scheduler:\n    podSelectors: [{matchLabels: {a: b}}]\n", false, []string{"servicesAndDependantSelectors: new service(s) kube-scheduler"}, false},
		{"restart: useEndpoints", testConfig, testConfig + "useEndpoints: true\n", false, []string{"useEndpoints"}, false},
		{"restart: a namespace selector where there was none", testConfig, testConfig + "namespaces: {selector: {matchLabels: {a: b}}}\n", false, []string{"namespaces.selector"}, false},
		{"restart: prober added", testConfig, testConfig + strings.TrimPrefix(prober, "\n"), false, []string{"prober: added or removed"}, false},
		{"restart: prober removed", testConfig + strings.TrimPrefix(prober, "\n"), testConfig, false, []string{"prober: added or removed"}, false},
		{"restart: prober namespace selector", prober, prober + "  namespaceSelector: {matchLabels: {x: z}}\n", false, []string{"prober.namespaceSelector"}, false},
		{"restart: job namespace", testConfig, testConfig + "jobTemplate: {namespace: other}\n", false, []string{"jobTemplate.namespace"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, err := ParseConfig([]byte(tc.base))
			if err != nil {
				t.Fatalf("base: %v", err)
			}
			next, err := ParseConfig([]byte(tc.next))
			if err != nil {
				t.Fatalf("next: %v", err)
			}
			flags := Options{UseEndpoints: tc.flag}
			flags.applyTo(base)
			flags.applyTo(next)
			got := RestartReasons(base, next)
			if tc.wantNone && len(got) > 0 {
				t.Fatalf("RestartReasons = %q, want none (a live change)", got)
			}
			for _, w := range tc.wantIn {
				if !slices.ContainsFunc(got, func(r string) bool { return strings.Contains(r, w) }) {
					t.Errorf("RestartReasons = %q, want one naming %q", got, w)
				}
			}
		})
	}
}

func TestReloadKeepsTheLastGoodConfigWhileTheFileIsInvalidAndRecovers(t *testing.T) {
	h := newReloadHarness(t, testConfig)
	if m := h.metrics(); m != (configMetrics{valid: 1}) {
		t.Fatalf("after the first read of the start config: %+v, want valid and nothing counted", m)
	}

	// valid → applied
	h.write(withWatch("4m"))
	if got := h.c.cur.Load().cfg.Watch(); got != 4*time.Minute {
		t.Fatalf("watchDuration after a valid change = %s, want 4m0s", got)
	}
	e := h.lastEntry(logrus.InfoLevel)
	if e == nil || !strings.Contains(e.Message, "reloaded") || fmt.Sprint(e.Data["changed"]) != "[watchDuration]" {
		t.Errorf("log of the reload: %+v", e)
	}
	if code, _ := h.readyz(); code != http.StatusOK {
		t.Errorf("readyz after a valid change = %d", code)
	}

	// invalid → kept, reported
	h.write(invalidConfig)
	if got := h.c.cur.Load().cfg.Watch(); got != 4*time.Minute {
		t.Errorf("watchDuration while the file is invalid = %s, want the last good 4m0s", got)
	}
	if m := h.metrics(); m != (configMetrics{valid: 0, success: 1, failure: 1}) {
		t.Errorf("metrics while invalid: %+v", m)
	}
	code, body := h.readyz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "watchDuration: -1m0s: must not be negative") ||
		!strings.Contains(body, "podSelectors[0]: empty selector") || !strings.Contains(body, "last good config") {
		t.Errorf("readyz while invalid = %d %q", code, body)
	}
	e = h.lastEntry(logrus.ErrorLevel)
	if e == nil || !strings.Contains(e.Message, "invalid") || !strings.Contains(fmt.Sprint(e.Data["errors"]), "watchDuration") {
		t.Errorf("error log of the invalid file: %+v", e)
	}
	// Read again unchanged: not logged or counted again.
	n := len(h.logs.AllEntries())
	h.check()
	if len(h.logs.AllEntries()) != n || h.metrics().failure != 1 {
		t.Errorf("the same invalid content was reported again")
	}

	// fixed → applied, recovered
	h.write(withWatch("6m"))
	if got := h.c.cur.Load().cfg.Watch(); got != 6*time.Minute {
		t.Errorf("watchDuration after the fix = %s, want 6m0s", got)
	}
	if m := h.metrics(); m != (configMetrics{valid: 1, success: 2, failure: 1}) {
		t.Errorf("metrics after the fix: %+v", m)
	}
	if code, body := h.readyz(); code != http.StatusOK {
		t.Errorf("readyz after the fix = %d %q", code, body)
	}
	if got := value(h.c.metrics.ConfigLastSuccess); got != float64(h.now.Unix()) {
		t.Errorf("last success timestamp = %v", got)
	}
}

func TestReloadOfTheRunningContentAfterAnInvalidOneRecoversWithoutChanges(t *testing.T) {
	h := newReloadHarness(t, testConfig)
	before := h.c.cur.Load()
	h.write(invalidConfig)
	h.write(testConfig)
	if h.c.cur.Load() != before {
		t.Error("the running config was replaced although the file came back to it")
	}
	if m := h.metrics(); m != (configMetrics{valid: 1, success: 1, failure: 1}) {
		t.Errorf("metrics: %+v", m)
	}
	if code, _ := h.readyz(); code != http.StatusOK {
		t.Errorf("readyz = %d", code)
	}
}

func TestUnreadableConfigFileIsReportedLikeAnInvalidOne(t *testing.T) {
	h := newReloadHarness(t, testConfig)
	if err := os.Remove(filepath.Join(h.file.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	h.check()
	code, body := h.readyz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cannot read it") {
		t.Errorf("readyz with the file gone = %d %q", code, body)
	}
	if h.c.cur.Load().cfg.Watch() != 3*time.Minute {
		t.Error("the running config changed")
	}
}

func TestRestartOnlyChangeIsNotAppliedAndSaysSo(t *testing.T) {
	h := newReloadHarness(t, testConfig)
	before := h.c.cur.Load()
	h.write(withWatch("8m") + "  kube-scheduler:\n    podSelectors: [{matchLabels: {a: b}}]\n")
	if h.c.cur.Load() != before {
		t.Fatal("a change that needs a restart was applied (even partly)")
	}
	if m := h.metrics(); m != (configMetrics{valid: 1, restart: 1, restartRequired: 1}) {
		t.Errorf("metrics: %+v", m)
	}
	if code, _ := h.readyz(); code != http.StatusOK {
		t.Errorf("readyz = %d; a valid file that needs a restart is not a readiness problem", code)
	}
	e := h.lastEntry(logrus.WarnLevel)
	if e == nil || !strings.Contains(fmt.Sprint(e.Data["needsRestart"]), "kube-scheduler") || !strings.Contains(e.Message, "restart") {
		t.Errorf("warning: %+v", e)
	}
	h.write(testConfig)
	if m := h.metrics(); m.restart != 0 || m.valid != 1 {
		t.Errorf("after putting the file back: %+v", m)
	}
}

func TestReloadRetriesAJobTemplateThatCouldNotBeResolved(t *testing.T) {
	h := newReloadHarness(t, testConfig)
	calls := 0
	h.c.resolve = func(_ context.Context, tpl jobs.Template) (jobs.Template, error) {
		calls++
		if calls == 1 {
			return tpl, errors.New("reading the coordinator's own pod: connection refused")
		}
		tpl.Namespace, tpl.Image = "depwatch", "img:2"
		return tpl, nil
	}
	h.write(testConfig + "jobTemplate: {backoffLimit: 5}\n")
	if code, body := h.readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") {
		t.Errorf("readyz after a failed resolve = %d %q", code, body)
	}
	h.check() // same content: tried again
	if calls != 2 || h.c.cur.Load().tpl.Image != "img:2" {
		t.Fatalf("resolve calls %d, image %q: want a retry that applied it", calls, h.c.cur.Load().tpl.Image)
	}
	if code, _ := h.readyz(); code != http.StatusOK {
		t.Errorf("readyz after the retry = %d", code)
	}
}

func TestReadyzAnswers(t *testing.T) {
	cases := []struct {
		name   string
		synced bool
		file   string
		code   int
		body   string
	}{
		{"caches not synced", false, testConfig, http.StatusServiceUnavailable, "informer caches not synced yet"},
		{"synced, config valid", true, testConfig, http.StatusOK, "ok"},
		{"synced, config invalid", true, invalidConfig, http.StatusServiceUnavailable, "is invalid (since 2026-05-01T10:00:00Z); running with the last good config"},
		{"synced, valid change needing a restart", true, "useEndpoints: true\n" + testConfig, http.StatusOK, "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newReloadHarness(t, testConfig)
			h.write(tc.file)
			h.c.synced.Store(tc.synced)
			code, body := h.readyz()
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("readyz = %d %q, want %d containing %q", code, body, tc.code, tc.body)
			}
		})
	}
}

func TestWatchConfigAppliesChangesAndStopsWithItsContext(t *testing.T) {
	h := newReloadHarness(t, testConfig)
	h.c.log.(*logrus.Logger).SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.c.watchConfig(ctx, h.file.path(), 5*time.Millisecond)
	}()
	h.file.update(withWatch("2m"))
	deadline := time.Now().Add(5 * time.Second)
	for h.c.cur.Load().cfg.Watch() != 2*time.Minute {
		if time.Now().After(deadline) {
			t.Fatal("the polling loop did not pick up the change")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watchConfig did not return after its context ended")
	}
}

// TestProberGetsTheReloadedSection: a reload hands the prober its new section (what the
// prober does with it is proven in package prober).
func TestProberGetsTheReloadedSection(t *testing.T) {
	h := newHarness(t, probeOnlyConfig)
	next := strings.Replace(probeOnlyConfig, "shoot-access", "shoot-access-2", 1)
	file := newConfigMapDir(t, next)
	h.c.checkConfig(context.Background(), file.path())
	if got := h.c.prober.Config().KubeConfigSecretName; got != "shoot-access-2" {
		t.Fatalf("prober secret after reload = %q, want shoot-access-2", got)
	}
}

// TestRunReloadsTheConfigFileUntilItsContextEnds: Run starts the polling loop with the
// caches synced and has stopped it when it returns (Run waits for every goroutine it starts).
func TestRunReloadsTheConfigFileUntilItsContextEnds(t *testing.T) {
	cfg, err := ParseConfig([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	file := newConfigMapDir(t, testConfig)
	log := logrus.New()
	log.SetOutput(io.Discard)
	m := NewMetrics("test")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Deps{
			Client: fake.NewClientset(), Config: cfg, Log: log, Metrics: m,
			Options: Options{ConfigFile: file.path(), ConfigReloadInterval: 10 * time.Millisecond,
				MetricsBindAddr: "0", HealthBindAddr: "0", ConcurrentReconciles: 1},
			Template: jobs.Template{Namespace: "depwatch", Image: "img"},
			Recorder: record.NewFakeRecorder(10),
		})
	}()
	file.update(invalidConfig)
	waitFor(t, "config_valid 0 after the file became invalid", func() bool { return value(m.ConfigValid) == 0 })
	file.update(withWatch("1m"))
	waitFor(t, "config_valid 1 after the fix", func() bool { return value(m.ConfigValid) == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run (and its config polling loop) did not return after cancel")
	}
}

const testConfig = `
watchDuration: 3m
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors: [{matchLabels: {app: kubernetes, role: apiserver}}]
  kube-apiserver:
    podSelectors:
      - matchLabels: {app: kubernetes, role: controller-manager}
      - matchLabels: {app: machine-controller-manager}
`

const probeOnlyConfig = `
prober:
  kubeConfigSecretName: shoot-access
  probeInterval: 10s
  initialDelay: 30s
  backoffJitterFactor: 0
  kcmNodeMonitorGraceDuration: 40s
  successfulJobsHistoryLimit: 1
  failedJobsHistoryLimit: 1
  probeJobRunDuration: 0s
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      scaleUp: {level: 1, timeout: 30s}
      scaleDown: {level: 0, timeout: 40s}
`

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// A reload that brings an unknown field applies the rest of the file and logs one warning
// naming the field's path; reading the same file again logs nothing new.
func TestReloadWarnsOfAnUnknownFieldOnceAndAppliesTheRest(t *testing.T) {
	h := newReloadHarness(t, testConfig)
	h.write(withWatch("4m") + "futureField: {a: 1}\n")
	if got := h.c.cur.Load().cfg.Watch(); got != 4*time.Minute {
		t.Fatalf("watchDuration = %s, want the rest of the file applied (4m0s)", got)
	}
	var warned []string
	for _, e := range h.logs.AllEntries() {
		if e.Level == logrus.WarnLevel && e.Data["reason"] == "unknown field" {
			warned = append(warned, fmt.Sprint(e.Data["field"]))
		}
	}
	if !slices.Equal(warned, []string{"futureField"}) {
		t.Errorf("warned of %q, want [futureField]", warned)
	}
	h.logs.Reset()
	h.write(withWatch("5m") + "futureField: {a: 2}\n")
	for _, e := range h.logs.AllEntries() {
		if e.Data["reason"] == "unknown field" {
			t.Errorf("warned again of the same ignored field: %s", e.Message)
		}
	}
}

// The prober section's ignored fields are logged by the coordinator with the others, each
// naming its path, when a reload brings them.
func TestReloadWarnsOfAnUnknownProberFieldByItsPath(t *testing.T) {
	start := testConfig + proberWith("") + "\n"
	h := newReloadHarness(t, start)
	h.write(testConfig + proberWith("internalProbeEnabled: true") + "\n")
	var warned []string
	for _, e := range h.logs.AllEntries() {
		if e.Level == logrus.WarnLevel && e.Data["reason"] == "unknown field" {
			warned = append(warned, fmt.Sprint(e.Data["field"]))
		}
	}
	if !slices.Equal(warned, []string{"prober.internalProbeEnabled"}) {
		t.Errorf("warned of %q, want [prober.internalProbeEnabled]", warned)
	}
}
