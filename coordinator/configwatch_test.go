package coordinator

import (
	"context"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/metrics"
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
	cfg, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	h := &harness{t: t, client: fake.NewClientset(), now: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	c, err := New(Deps{
		Shared:  ctrl.Shared{Client: h.client, Log: log, Template: jobs.Template{Namespace: "depwatch", Image: "localhost/depwatch:dev"}, Recorder: record.NewFakeRecorder(100), Now: func() time.Time { return h.now }},
		Config:  cfg,
		Metrics: metrics.New("test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

// watchHarness is the coordinator with its config file mounted as a ConfigMap and the
// coordinator's log captured.
type watchHarness struct {
	*harness
	file *configMapDir
	logs *logtest.Hook
}

func newWatchHarness(t *testing.T, cfgYAML string) *watchHarness {
	t.Helper()
	h := newHarness(t, cfgYAML)
	log, hook := logtest.NewNullLogger()
	h.c.Log = log
	file := newConfigMapDir(t, cfgYAML)
	h.c.Options.ConfigFile = file.path()
	h.c.synced.Store(true)
	return &watchHarness{harness: h, file: file, logs: hook}
}

// write updates the file and lets the coordinator check it once: true, it asks to restart.
func (h *watchHarness) write(content string) bool {
	h.t.Helper()
	h.file.update(content)
	return h.c.checkConfig()
}

func (h *watchHarness) readyz() (int, string) {
	rec := httptest.NewRecorder()
	h.c.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// messages are the log's messages at level.
func (h *watchHarness) messages(level logrus.Level) []string {
	var out []string
	for _, e := range h.logs.AllEntries() {
		if e.Level == level {
			out = append(out, e.Message+" "+fmt.Sprint(e.Data))
		}
	}
	return out
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

func TestConfigFileCheckRestartsOnlyForAValidChange(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		restart bool
		valid   float64
		readyz  int
		logged  string // in the log line of that outcome
	}{
		{"the content it started with", testConfig, false, 1, http.StatusOK, ""},
		{"the same config in other words", "# edited\n" + withWatch("180s"), false, 1, http.StatusOK, ""},
		{"a valid change", withWatch("4m"), true, 1, http.StatusOK, "changed:[watchDuration]"},
		{"an unknown field beside a valid change", withWatch("4m") + "futureField: 1\n", true, 1, http.StatusOK, "changed:[watchDuration]"},
		{"an invalid file", invalidConfig, false, 0, http.StatusServiceUnavailable, "watchDuration: -1m0s: must not be negative"},
		{"a file that is not YAML", "watchDuration: [", false, 0, http.StatusServiceUnavailable, "--config-file="},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newWatchHarness(t, testConfig)
			if got := h.write(tc.file); got != tc.restart {
				t.Errorf("restart = %v, want %v", got, tc.restart)
			}
			if got := value(h.c.Metrics.ConfigValid); got != tc.valid {
				t.Errorf("config_valid = %v, want %v", got, tc.valid)
			}
			if code, body := h.readyz(); code != tc.readyz {
				t.Errorf("readyz = %d %q, want %d", code, body, tc.readyz)
			}
			logged := strings.Join(append(h.messages(logrus.InfoLevel), h.messages(logrus.ErrorLevel)...), "\n")
			if !strings.Contains(logged, tc.logged) || (tc.logged == "") != (logged == "") {
				t.Errorf("log %q, want a line with %q", logged, tc.logged)
			}
		})
	}
}

func TestInvalidConfigFileIsReportedOnceAndClearedWhenPutBack(t *testing.T) {
	h := newWatchHarness(t, testConfig)
	h.write(invalidConfig)
	code, body := h.readyz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "is invalid (since 2026-05-01T10:00:00Z); running with the config it started with") ||
		!strings.Contains(body, "podSelectors[0]: empty selector") {
		t.Errorf("readyz while invalid = %d %q", code, body)
	}
	h.now = h.now.Add(time.Minute)
	if h.c.checkConfig() || len(h.messages(logrus.ErrorLevel)) != 1 {
		t.Errorf("the same invalid file was reported again: %q", h.messages(logrus.ErrorLevel))
	}
	if restart := h.write(testConfig); restart || value(h.c.Metrics.ConfigValid) != 1 {
		t.Errorf("put back: restart %v, config_valid %v; want no restart and valid", restart, value(h.c.Metrics.ConfigValid))
	}
	if code, body := h.readyz(); code != http.StatusOK {
		t.Errorf("readyz once put back = %d %q", code, body)
	}
	if info := h.messages(logrus.InfoLevel); len(info) != 1 || !strings.Contains(info[0], "valid again") {
		t.Errorf("log once put back: %q", info)
	}
}

func TestReadyzWaitsForTheCaches(t *testing.T) {
	h := newWatchHarness(t, testConfig)
	h.c.synced.Store(false)
	if code, body := h.readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "informer caches not synced yet") {
		t.Errorf("readyz before the caches synced = %d %q", code, body)
	}
}

// A valid change stops Run as SIGTERM does: the Lease released, nil returned (exit 0), so
// that the Deployment starts the coordinator again with the file. An invalid one before it
// stops nothing.
func TestRunStopsAndReleasesTheLeaseWhenTheConfigFileChanges(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	file := newConfigMapDir(t, testConfig)
	client := fake.NewClientset()
	log := logrus.New()
	log.SetOutput(io.Discard)
	m := metrics.New("test")
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Deps{
			Shared:   ctrl.Shared{Client: client, Log: log, Template: jobs.Template{Namespace: "depwatch", Image: "img"}, Recorder: record.NewFakeRecorder(100)},
			Config:   cfg,
			Metrics:  m,
			Identity: "test-1",
			Options: Options{ConfigFile: file.path(), ConfigReloadInterval: 10 * time.Millisecond,
				MetricsBindAddr: "0", HealthBindAddr: "0", ConcurrentReconciles: 1,
				EnableLeaderElection: true, LeaderElectionNamespace: "depwatch",
				LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond},
		})
	}()
	waitFor(t, "the Lease to be taken", func() bool { return leaseHeldBy(client) == "test-1" })
	file.update(invalidConfig)
	waitFor(t, "config_valid 0 after the file became invalid", func() bool { return value(m.ConfigValid) == 0 })
	select {
	case err := <-done:
		t.Fatalf("Run stopped on an invalid config file: %v", err)
	default:
	}
	file.update(withWatch("1m"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want nil (exit 0) on a valid change", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after a valid change of its config file")
	}
	if holder := leaseHeldBy(client); holder != "" {
		t.Errorf("the Lease is still held by %q", holder)
	}
}

func leaseHeldBy(client *fake.Clientset) string {
	l, _ := client.CoordinationV1().Leases("depwatch").Get(context.Background(), LeaseName, metav1.GetOptions{})
	return leaseHolder(l)
}

func TestStartWarnsOfEachIgnoredFieldByItsPath(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig + "futureField: 1\n" + proberWith("internalProbeEnabled: true") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	log, hook := logtest.NewNullLogger()
	if _, err := New(Deps{Shared: ctrl.Shared{Client: fake.NewClientset(), Log: log, Template: jobs.Template{Namespace: "depwatch", Image: "img"}}, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && e.Data["reason"] == "unknown field" {
			warned = append(warned, fmt.Sprint(e.Data["field"]))
		}
	}
	if !slices.Equal(warned, []string{"futureField", "prober.internalProbeEnabled"}) {
		t.Errorf("warned of %q, want [futureField prober.internalProbeEnabled]", warned)
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

const hostileRes = "dependentResourceInfos: [{ref: {kind: Deployment, name: kcm, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]"

// proberWith builds a prober section with the required fields and extra (a flow-map fragment).
func proberWith(extra string) string {
	if extra != "" {
		extra += ", "
	}
	return "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, " + extra + hostileRes + "}"
}
