package coordinator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/metrics"
	"github.com/depwatch/depwatch/coordinator/rights"
	"github.com/depwatch/depwatch/coordinator/weeder"
	"github.com/depwatch/depwatch/jobs"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFlagsDefaults(t *testing.T) {
	o, err := ParseFlags([]string{"--config-file=c.yaml"}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{ConfigFile: "c.yaml", ConfigReloadInterval: DefaultConfigReloadInterval, KubeAPIQPS: 20, KubeAPIBurst: 100, ConcurrentReconciles: 1,
		EventsQPS: 100, EventsBurst: 500, Batching: weeder.DefaultBatching(),
		MetricsBindAddr: ":9643", HealthBindAddr: ":9644", LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Executor: rights.ExecutorChoiceJob}
	if o != want {
		t.Errorf("got %+v\nwant %+v", o, want)
	}
}

func TestFlagsFromEnvironmentAndFlagWins(t *testing.T) {
	env := envOf(map[string]string{
		"DEPWATCH_CONFIG_FILE":                 "/etc/depwatch/config.yaml",
		"DEPWATCH_KUBE_API_QPS":                "20",
		"DEPWATCH_KUBE_API_BURST":              "40",
		"DEPWATCH_CONCURRENT_RECONCILES":       "3",
		"DEPWATCH_ENABLE_LEADER_ELECTION":      "true",
		"DEPWATCH_LEADER_ELECTION_NAMESPACE":   "ops",
		"DEPWATCH_LEADER_ELECT_LEASE_DURATION": "30s",
		"DEPWATCH_USE_ENDPOINTS":               "1",
		"DEPWATCH_METRICS_BIND_ADDR":           ":19643",
	})
	o, err := ParseFlags([]string{"--kube-api-qps=7", "--health-bind-addr=127.0.0.1:19644"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.ConfigFile != "/etc/depwatch/config.yaml" || o.KubeAPIQPS != 7 || o.KubeAPIBurst != 40 || o.ConcurrentReconciles != 3 ||
		!o.EnableLeaderElection || o.LeaderElectionNamespace != "ops" || o.LeaseDuration != 30*time.Second || !o.UseEndpoints ||
		o.MetricsBindAddr != ":19643" || o.HealthBindAddr != "127.0.0.1:19644" {
		t.Errorf("%+v", o)
	}
}

func TestFlagsZeroQPSAndBurstMeanDefaults(t *testing.T) {
	o, err := ParseFlags([]string{"--config-file=c", "--kube-api-qps=0", "--kube-api-burst=0"}, envOf(nil), io.Discard)
	if err != nil || o.KubeAPIQPS != 20 || o.KubeAPIBurst != 100 {
		t.Errorf("%+v %v", o, err)
	}
}

func TestFlagsRefuseBadValuesNamingThem(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"config file required", nil, nil, "--config-file: required"},
		{"negative qps", []string{"--kube-api-qps=-1"}, nil, "--kube-api-qps=-1: must not be negative"},
		{"negative burst", []string{"--kube-api-burst=-3"}, nil, "--kube-api-burst=-3: must not be negative"},
		{"negative config reload interval", []string{"--config-reload-interval=-1s"}, nil, "--config-reload-interval=-1s: must not be negative"},
		{"unparsable burst", []string{"--kube-api-burst=ten"}, nil, `--kube-api-burst="ten": cannot be parsed`},
		{"zero reconciles", []string{"--concurrent-reconciles=0"}, nil, "--concurrent-reconciles=0: must be at least 1"},
		{"negative reconciles", []string{"--concurrent-reconciles=-2"}, nil, "--concurrent-reconciles=-2"},
		{"bad duration", []string{"--leader-elect-lease-duration=15"}, nil, `--leader-elect-lease-duration="15": cannot be parsed`},
		{"negative duration", []string{"--leader-elect-retry-period=-2s"}, nil, "--leader-elect-retry-period=-2s: must be positive"},
		{"renew ≥ lease", []string{"--leader-elect-renew-deadline=20s"}, nil, "--leader-elect-renew-deadline=20s: must be shorter than --leader-elect-lease-duration=15s"},
		{"bad bind addr", []string{"--metrics-bind-addr=9643"}, nil, `--metrics-bind-addr="9643": must be host:port`},
		{"bad bool", []string{"--enable-leader-election=yes"}, nil, `--enable-leader-election="yes": cannot be parsed`},
		{"unknown flag", []string{"--leader-elect=true"}, nil, "unknown flag --leader-elect"},
		{"positional argument", []string{"--config-file=c", "extra"}, nil, `unexpected argument "extra"`},
		{"bad env value names the variable", nil, map[string]string{"DEPWATCH_CONFIG_FILE": "c", "DEPWATCH_KUBE_API_QPS": "fast"}, `DEPWATCH_KUBE_API_QPS="fast" (--kube-api-qps): cannot be parsed`},
		{"negative from env", nil, map[string]string{"DEPWATCH_CONFIG_FILE": "c", "DEPWATCH_KUBE_API_BURST": "-1"}, "--kube-api-burst=-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.env == nil && tc.name != "config file required" {
				args = append([]string{"--config-file=c"}, args...)
			}
			_, err := ParseFlags(args, envOf(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFlagsReportEveryProblemAtOnce(t *testing.T) {
	_, err := ParseFlags([]string{"--kube-api-qps=-1", "--kube-api-burst=-1"}, envOf(nil), io.Discard)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"--config-file", "--kube-api-qps", "--kube-api-burst"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %s in %v", want, err)
		}
	}
}

func TestHelpListsEveryFlagWithDefaultAndVariable(t *testing.T) {
	var out bytes.Buffer
	_, err := ParseFlags([]string{"--help"}, envOf(nil), &out)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"--config-file", "DEPWATCH_CONFIG_FILE", "--kube-api-qps", "default 20,", "--kube-api-burst", "default 100,",
		"--concurrent-reconciles", "--metrics-bind-addr", "default :9643", "--health-bind-addr", "default :9644",
		"--enable-leader-election", "--leader-election-namespace", "--leader-elect-lease-duration", "default 15s",
		"--leader-elect-renew-deadline", "default 10s", "--leader-elect-retry-period", "default 2s", "--use-endpoints",
		"--kubeconfig", "env KUBECONFIG", "DEPWATCH_LEADER_ELECT_RETRY_PERIOD",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// --check-config is read from the command line only: a DEPWATCH_CHECK_CONFIG left in a
// Deployment's environment must not turn every start into a check that exits.
func TestCheckConfigIsACommandLineFlagOnly(t *testing.T) {
	o, err := ParseFlags([]string{"--config-file=c.yaml"}, envOf(map[string]string{"DEPWATCH_CHECK_CONFIG": "true"}), io.Discard)
	if err != nil || o.CheckConfig {
		t.Errorf("DEPWATCH_CHECK_CONFIG=true: CheckConfig %v, err %v; want it ignored", o.CheckConfig, err)
	}
	if o, err = ParseFlags([]string{"--config-file=c.yaml", "--check-config"}, envOf(nil), io.Discard); err != nil || !o.CheckConfig {
		t.Errorf("--check-config: CheckConfig %v, err %v", o.CheckConfig, err)
	}
	var out bytes.Buffer
	_, _ = ParseFlags([]string{"--help"}, envOf(nil), &out)
	if !strings.Contains(out.String(), "--check-config") || !strings.Contains(out.String(), "no env (command line only)") || strings.Contains(out.String(), "DEPWATCH_CHECK_CONFIG") {
		t.Errorf("the help does not say --check-config has no variable:\n%s", out.String())
	}
}

// TestRunEndToEndOnFakeClientset runs the whole coordinator (informers, leader election on a
// Lease, health endpoints, workers) against the fake clientset: a notReady → Ready update
// produces a weeder Job, and cancelling the context stops everything and releases the Lease.
func TestRunEndToEndOnFakeClientset(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(down("shoot--a", "etcd-main-client"))
	log := logrus.New()
	log.SetOutput(io.Discard)
	opts := Options{
		ConcurrentReconciles: 2, MetricsBindAddr: "127.0.0.1:0", HealthBindAddr: "127.0.0.1:0",
		EnableLeaderElection: true, LeaderElectionNamespace: "depwatch",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Deps{
			Shared:   ctrl.Shared{Client: client, Log: log, Template: jobs.Template{Namespace: "depwatch", Image: "img"}, Recorder: record.NewFakeRecorder(100)},
			Config:   cfg,
			Options:  opts,
			Metrics:  metrics.New("test"),
			Identity: "test-1",
		})
	}()

	waitFor(t, "the Lease to be taken", func() bool {
		l, err := client.CoordinationV1().Leases("depwatch").Get(ctx, LeaseName, metav1.GetOptions{})
		return err == nil && ptr.Deref(l.Spec.HolderIdentity, "") == "test-1"
	})
	// The first sighting (notReady) must have been reconciled before the return.
	time.Sleep(300 * time.Millisecond)
	ready := up("shoot--a", "etcd-main-client")
	if _, err := client.DiscoveryV1().EndpointSlices("shoot--a").Update(ctx, ready, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a weeder Job", func() bool {
		l, _ := client.BatchV1().Jobs("depwatch").List(ctx, metav1.ListOptions{})
		return l != nil && len(l.Items) == 1
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	l, err := client.CoordinationV1().Leases("depwatch").Get(context.Background(), LeaseName, metav1.GetOptions{})
	if err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "" {
		t.Errorf("lease not released: %+v %v", leaseHolder(l), err)
	}
}

func leaseHolder(l *coordinationv1.Lease) string {
	if l == nil {
		return "<nil>"
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func TestRunRefusesABusyPort(t *testing.T) {
	cfg, _ := config.Parse([]byte(testConfig))
	log := logrus.New()
	log.SetOutput(io.Discard)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	err = Run(context.Background(), Deps{
		Shared:  ctrl.Shared{Client: fake.NewClientset(), Log: log, Template: jobs.Template{Namespace: "depwatch", Image: "img"}, Recorder: record.NewFakeRecorder(10)},
		Config:  cfg,
		Metrics: metrics.New("t"),
		Options: Options{MetricsBindAddr: addr, HealthBindAddr: "0", ConcurrentReconciles: 1},
	})
	if err == nil || !strings.Contains(err.Error(), "--metrics-bind-addr="+addr) {
		t.Errorf("err = %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// An EndpointSlice of svc with one endpoint, not ready (down) or ready (up).
func down(ns, svc string) *discoveryv1.EndpointSlice { return oneEndpoint(ns, svc, false) }
func up(ns, svc string) *discoveryv1.EndpointSlice   { return oneEndpoint(ns, svc, true) }

func oneEndpoint(ns, svc string, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
	}
}
