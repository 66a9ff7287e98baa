package coordinator

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/coordinator/rights"
	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/coordinator/weeder"
	"github.com/depwatch/depwatch/test/upstream"
)

// gardenletArgs are the arguments gardenlet gives dependency-watchdog's container after the
// binary (gardener v1.149.3, pkg/component/nodemanagement/dependencywatchdog/bootstrap.go,
// getContainerCommand).
var gardenletArgs = map[roles.Role][]string{
	roles.Weeder: {"--config-file=/etc/dependency-watchdog/config/dep-config.yaml", "--enable-leader-election=true"},
	roles.Prober: {"--config-file=/etc/dependency-watchdog/config/dep-config.yaml", "--kube-api-qps=20.0", "--kube-api-burst=100",
		"--zap-log-level=INFO", "--enable-leader-election=true"},
}

func noEnv(string) (string, bool) { return "", false }

func TestDWDCommandsTakeGardenletsFlags(t *testing.T) {
	for role, args := range gardenletArgs {
		t.Run(string(role), func(t *testing.T) {
			o, s, err := ParseDWDFlags(role, args, noEnv, &bytes.Buffer{})
			if err != nil {
				t.Fatalf("gardenlet's command line refused: %v", err)
			}
			if o.ConfigFile != "/etc/dependency-watchdog/config/dep-config.yaml" || !o.EnableLeaderElection || o.Role != role {
				t.Errorf("options %+v", o)
			}
			if len(s.NoEffect) != 0 {
				t.Errorf("gardenlet's flags all have an effect; warned about %v", s.NoEffect)
			}
			wantLease := map[roles.Role]string{roles.Weeder: "dwd-weeder-leader-election", roles.Prober: "dwd-prober-leader-election"}[role]
			if o.Lease() != wantLease {
				t.Errorf("Lease %q, want dependency-watchdog's %q (gardenlet's roles.Role grants that name only)", o.Lease(), wantLease)
			}
			switch role {
			case roles.Prober:
				if o.KubeAPIQPS != 20 || o.KubeAPIBurst != 100 {
					t.Errorf("qps %v burst %d, want 20 and 100", o.KubeAPIQPS, o.KubeAPIBurst)
				}
				if s.LogLevel == nil || *s.LogLevel != logrus.InfoLevel {
					t.Errorf("--zap-log-level=INFO gave level %v", s.LogLevel)
				}
			case roles.Weeder:
				if o.KubeAPIQPS != 5 || o.KubeAPIBurst != 10 {
					t.Errorf("qps %v burst %d, want dependency-watchdog's defaults 5 and 10", o.KubeAPIQPS, o.KubeAPIBurst)
				}
			}
			if o.MetricsBindAddr != ":9643" || o.HealthBindAddr != ":9644" || o.ConcurrentReconciles != 1 {
				t.Errorf("defaults %q %q %d, want dependency-watchdog's :9643 :9644 1", o.MetricsBindAddr, o.HealthBindAddr, o.ConcurrentReconciles)
			}
			// The coordinator's own settings keep its defaults; the executor is decided by the Job rights.
			if o.ConfigReloadInterval != DefaultConfigReloadInterval || o.EventsQPS != 100 || o.EventsBurst != 500 ||
				o.Batching != weeder.DefaultBatching() || o.Executor != rights.ExecutorChoiceAuto || o.UseEndpoints || o.JobEgressPolicy {
				t.Errorf("the coordinator's own settings %+v, want its defaults and --executor=auto", o)
			}
		})
	}
}

// TestDWDCommandsAcceptEveryDocumentedFlag: each flag dependency-watchdog's binary or help
// knows is accepted; those depwatch does not use are named, all in one list (one warning).
func TestDWDCommandsAcceptEveryDocumentedFlag(t *testing.T) {
	args := []string{
		"--config-file=c.yaml", "--concurrent-reconciles=3", "--kube-api-qps=7.5", "--kube-api-burst=12",
		"--metrics-bind-address=:19643", "--health-bind-address=:19644", "--pprof-bind-addr=:8081",
		"--enable-leader-election", "--leader-election-namespace=garden", "--leader-elect-lease-duration=20s",
		"--leader-elect-renew-deadline=15s", "--leader-elect-retry-period=3s", "--kubeconfig=/tmp/kc",
		"--zap-devel=false", "--zap-encoder=console", "--zap-log-level=2", "--zap-stacktrace-level=error",
		"--zap-time-encoding=rfc3339", "-zap-encoder", "json", // Go's flag syntax: one dash, value apart
	}
	o, s, err := ParseDWDFlags(roles.Prober, args, noEnv, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if o.MetricsBindAddr != ":19643" || o.HealthBindAddr != ":19644" {
		t.Errorf("the help's spellings --metrics-bind-address/--health-bind-address set %q %q", o.MetricsBindAddr, o.HealthBindAddr)
	}
	if o.ConcurrentReconciles != 3 || o.KubeAPIQPS != 7.5 || o.KubeAPIBurst != 12 || o.LeaderElectionNamespace != "garden" ||
		o.LeaseDuration != 20*time.Second || o.RenewDeadline != 15*time.Second || o.RetryPeriod != 3*time.Second || o.Kubeconfig != "/tmp/kc" {
		t.Errorf("options %+v", o)
	}
	if s.LogLevel == nil || *s.LogLevel != logrus.DebugLevel {
		t.Errorf("--zap-log-level=2 (zap verbosity) gave %v, want debug", s.LogLevel)
	}
	joined := strings.Join(s.NoEffect, "\n")
	for _, name := range []string{"--pprof-bind-addr=:8081", "--zap-devel=false", "--zap-encoder=json", "--zap-stacktrace-level=error", "--zap-time-encoding=rfc3339"} {
		if !strings.Contains(joined, name) {
			t.Errorf("no-effect list lacks %s:\n%s", name, joined)
		}
	}
	if len(s.NoEffect) != 5 {
		t.Errorf("no-effect list has %d entries, want one per flag given (5): %v", len(s.NoEffect), s.NoEffect)
	}
}

func TestDWDCommandsRefuseBadValuesNamingFlagAndValue(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		named []string
	}{
		{"qps not a number", []string{"--config-file=c", "--kube-api-qps=fast"}, nil, []string{`--kube-api-qps="fast"`}},
		{"zap level", []string{"--config-file=c", "--zap-log-level=loud"}, nil, []string{`--zap-log-level="loud"`, "debug, info, error, panic"}},
		{"zap level zero", []string{"--config-file=c", "--zap-log-level=0"}, nil, []string{`--zap-log-level="0"`}},
		{"zap encoder", []string{"--config-file=c", "--zap-encoder=xml"}, nil, []string{`--zap-encoder="xml"`, "json, console"}},
		{"zap time encoding", []string{"--config-file=c", "--zap-time-encoding=local"}, nil, []string{`--zap-time-encoding="local"`}},
		{"zap devel", []string{"--config-file=c", "--zap-devel=maybe"}, nil, []string{`--zap-devel="maybe"`}},
		{"duration", []string{"--config-file=c", "--leader-elect-lease-duration=soon"}, nil, []string{`--leader-elect-lease-duration="soon"`}},
		{"workers", []string{"--config-file=c", "--concurrent-reconciles=0"}, nil, []string{"--concurrent-reconciles=0"}},
		{"address", []string{"--config-file=c", "--metrics-bind-addr=nowhere"}, nil, []string{`--metrics-bind-addr="nowhere"`}},
		{"unknown flag", []string{"--config-file=c", "--probe-everything"}, nil, []string{"unknown flag --probe-everything"}},
		{"no config file", nil, nil, []string{"--config-file: required"}},
		{"a stray argument", []string{"--config-file=c", "extra"}, nil, []string{`unexpected argument "extra"`}},
		{"bad variable with a bad flag", []string{"--config-file=c", "--kube-api-burst=x"}, map[string]string{"DEPWATCH_KUBE_API_QPS": "-"},
			[]string{`DEPWATCH_KUBE_API_QPS="-"`, `--kube-api-burst="x"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			_, _, err := ParseDWDFlags(roles.Weeder, tc.args, lookup, &bytes.Buffer{})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, n := range tc.named {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("the refusal does not name %q:\n%v", n, err)
				}
			}
		})
	}
}

func TestDWDFlagsTakeTheirVariablesAndTheFlagWins(t *testing.T) {
	env := map[string]string{"DEPWATCH_METRICS_BIND_ADDR": "127.0.0.1:29643", "DEPWATCH_KUBE_API_QPS": "9"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := ParseDWDFlags(roles.Weeder, []string{"--config-file=c", "--kube-api-qps=11"}, lookup, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsBindAddr != "127.0.0.1:29643" || o.KubeAPIQPS != 11 {
		t.Errorf("metrics %q qps %v: want the variable's address and the flag's qps", o.MetricsBindAddr, o.KubeAPIQPS)
	}
}

func TestDWDHelpNamesEveryFlag(t *testing.T) {
	var out bytes.Buffer
	_, _, err := ParseDWDFlags(roles.Prober, []string{"--help"}, noEnv, &out)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err %v, want ErrHelp", err)
	}
	for _, want := range []string{"--config-file", "--zap-log-level", "--pprof-bind-addr", "no effect", "DEPWATCH_KUBE_API_QPS", "dwd-prober-leader-election", "in this process"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDWDCommandsReadTheirOwnConfigMaps(t *testing.T) {
	dir := t.TempDir()
	weederFile, proberFile := filepath.Join(dir, "weeder.yaml"), filepath.Join(dir, "prober.yaml")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(weederFile, gardenletWeederConfigMap)
	write(proberFile, gardenletProberConfigMap)

	w, err := Options{Role: roles.Weeder, ConfigFile: weederFile}.LoadConfig()
	if err != nil {
		t.Fatalf("weeder: %v", err)
	}
	if w.Prober != nil || len(w.Services()) != 2 || w.Watch() != 5*time.Minute {
		t.Errorf("weeder config: prober %v services %v watch %s", w.Prober, w.Services(), w.Watch())
	}
	p, err := Options{Role: roles.Prober, ConfigFile: proberFile}.LoadConfig()
	if err != nil {
		t.Fatalf("prober: %v", err)
	}
	if p.Prober == nil || len(p.Services()) != 0 || p.Prober.Interval() != 30*time.Second {
		t.Fatalf("prober config: %+v", p)
	}
	if len(p.Warnings()) != 0 || len(w.Warnings()) != 0 {
		t.Errorf("gardenlet's ConfigMaps produced warnings: %v %v", w.Warnings(), p.Warnings())
	}
	// Each command refuses the other's file, naming why.
	if _, err := (Options{Role: roles.Weeder, ConfigFile: proberFile}).LoadConfig(); err == nil {
		t.Error("the weeder accepted the prober's ConfigMap")
	}
	if _, err := (Options{Role: roles.Prober, ConfigFile: weederFile}).LoadConfig(); err == nil || !strings.Contains(err.Error(), "prober.") {
		t.Errorf("the prober accepted the weeder's ConfigMap, or did not name its fields: %v", err)
	}
}

// gardenletWeederConfigMap and gardenletProberConfigMap are the dep-config.yaml keys of the
// ConfigMaps gardenlet writes (test/upstream).
var (
	gardenletWeederConfigMap = upstream.GardenletWeederConfig()
	gardenletProberConfigMap = upstream.GardenletProberConfig()
)
