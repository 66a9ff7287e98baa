package probe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/termmsg"
)

// FuzzLoadOptions: any environment of `depwatch probe`, however broken, gives options or a
// *envconf.ConfigError whose every line names a variable - never a panic. Options that are
// accepted satisfy everything Run relies on (runnable), so no probe starts on a
// half-valid configuration.
func FuzzLoadOptions(f *testing.F) {
	valid := "NAMESPACE=shoot--a\nKUBECONFIG_SECRET_NAME=probe-kubeconfig\nKCM_NODE_MONITOR_GRACE_DURATION=40s\nDEPENDENT_RESOURCES=" +
		strings.ReplaceAll(validResources, "\n", " ")
	for _, seed := range []string{
		valid,
		valid + "\nPROBE_TIMEOUT=5s\nNODE_LEASE_FAILURE_FRACTION=1\nLEASE_EXPIRY_BUFFER_FRACTION=0.5\nDRY_RUN=true\nSCHEDULE=@every 10s\nRUN_DURATION=10m",
		valid + "\nNODE_LEASE_FAILURE_FRACTION=NaN\nLEASE_EXPIRY_BUFFER_FRACTION=+Inf",
		valid + "\nNODE_LEASE_FAILURE_FRACTION=0\nLEASE_EXPIRY_BUFFER_FRACTION=-0.5",
		valid + "\nNODE_LEASE_FAILURE_FRACTION=1e-400\nLEASE_EXPIRY_BUFFER_FRACTION=0x1p-2",
		valid + "\nPROBE_TIMEOUT=-1s\nKCM_NODE_MONITOR_GRACE_DURATION=0s",
		valid + "\nSCHEDULE=TZ=UTC\nRUN_DURATION=1h",
		valid + "\nSCHEDULE=0 0 30 2 *\nRUN_DURATION=1h",
		valid + "\nRUN_DURATION=1h",
		valid + "\nSCHEDULE=@every 1s",
		valid + "\nDRY_RUN=yes\nNAMESPACE=\nKUBECONFIG_SECRET_NAME=a/b",
		"NAMESPACE=kube-system\nKUBECONFIG_SECRET_NAME=x\nKCM_NODE_MONITOR_GRACE_DURATION=40s\nDEPENDENT_RESOURCES=[]",
		"DEPENDENT_RESOURCES=[{\"ref\":{\"kind\":\"Nope\",\"name\":\"x\",\"apiVersion\":\"garbage//v1\"},\"scaleUp\":{\"level\":0},\"scaleDown\":{\"level\":0}}]",
		"",
		"NAMESPACES=shoot--a,shoot--b\nNAMESPACE_SETTINGS={\"shoot--b\":{\"nodeMonitorGrace\":\"1m\",\"notBefore\":\"2026-05-01T12:00:00Z\"}}\nPROBE_CONCURRENCY=2\nBACKOFF_JITTER_FACTOR=0.2\nKUBECONFIG_SECRET_NAME=x\nKCM_NODE_MONITOR_GRACE_DURATION=40s\nDEPENDENT_RESOURCES=" + strings.ReplaceAll(validResources, "\n", " "),
		"NAMESPACES=a,,a\nNAMESPACE_SETTINGS={\"zz\":{}}\nPROBE_CONCURRENCY=-1\nBACKOFF_JITTER_FACTOR=NaN",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, blob string) {
		env := map[string]string{}
		for _, line := range strings.Split(blob, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		o, err := LoadOptions(lookupFrom(env))
		if err != nil {
			var ce *envconf.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v is not a *envconf.ConfigError with problems", err)
			}
			for _, p := range ce.Problems {
				if strings.Contains(p, "\n") || !namesAVariable(p) {
					t.Fatalf("problem %q is not one line naming a variable", p)
				}
			}
			return
		}
		if err := runnable(o); err != nil {
			t.Fatalf("LoadOptions accepted options Run cannot use: %v", err)
		}
	})
}

// runnable is what Run relies on of its options.
func runnable(o Options) error {
	var problems []string
	for _, c := range []struct {
		bad     bool
		problem string
	}{
		{(o.Namespace == "") == (len(o.Namespaces) == 0), "exactly one of a namespace or a list of namespaces is needed"},
		{o.Concurrency < 0 || o.Jitter < 0 || o.Jitter >= 1, "concurrency must not be negative, jitter in [0,1)"},
		{o.KubeconfigSecretName == "", "no kubeconfig Secret name"},
		{o.ProbeTimeout <= 0, "probe timeout must be > 0"},
		{o.NodeMonitorGrace <= 0, "node monitor grace duration must be > 0"},
		{!(o.NodeLeaseFailureFraction > 0 && o.NodeLeaseFailureFraction <= 1), "node lease failure fraction must be in (0,1]"},
		{!(o.LeaseExpiryBufferFraction > 0 && o.LeaseExpiryBufferFraction <= 1), "lease expiry buffer fraction must be in (0,1]"},
		{len(o.Resources) == 0, "no dependent resources"},
		{(o.Schedule == nil) != (o.RunDuration <= 0), "a schedule needs a run duration > 0 and vice versa"},
	} {
		if c.bad {
			problems = append(problems, c.problem)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("probe options: %w", &envconf.ConfigError{Problems: problems})
	}
	return nil
}

// namesAVariable: a problem starts with one of the probe's variables (DEPENDENT_RESOURCES
// problems continue with the path inside the value).
func namesAVariable(p string) bool {
	for _, s := range settings {
		if strings.HasPrefix(p, s.Name+"=") || strings.HasPrefix(p, s.Name+":") || strings.HasPrefix(p, s.Name+"[") {
			return true
		}
	}
	return false
}

// FuzzDecodeReport: any termination message gives a report or ErrNotAReport, never a panic;
// a report that is read is written back to one that reads the same, within 4 KiB.
func FuzzDecodeReport(f *testing.F) {
	for _, seed := range []string{
		`{"v":1,"end":1777636800,"results":{"healthy":3},"ops":{"unchanged":3},"ns":{"shoot--a":["healthy",4]}}`,
		EncodeReport(Report{End: time.Unix(1777636800, 0), Results: map[string]int{"throttled": 1},
			Namespaces: map[string]NamespaceResult{"shoot--a--b": {Last: ResultThrottled, Ago: time.Second, Throttled: 2}}}),
		`{"v":1,"end":1,"dryRun":true,"ns":{"a":["throttled",1,2],"b":["not-probed"]},"omitted":3}`,
		`namespace=a probes=1 last=healthy resources: scaled-down=0`,
		`{"v":1,"end":1,"ns":{"a":[1,2,3,4]}}`,
		``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		r, err := DecodeReport(msg)
		if err != nil {
			if !errors.Is(err, ErrNotAReport) {
				t.Fatalf("DecodeReport error %v is not ErrNotAReport", err)
			}
			return
		}
		again := EncodeReport(r)
		if len(again) > termmsg.MaxBytes && len(r.Namespaces) > 0 {
			t.Fatalf("re-encoded report is %d bytes", len(again))
		}
		r2, err := DecodeReport(again)
		if err != nil {
			t.Fatalf("a report read from %q does not read back: %v (%s)", msg, err, again)
		}
		if len(r2.Namespaces)+r2.Omitted != len(r.Namespaces)+r.Omitted {
			t.Fatalf("namespaces lost: %d+%d then %d+%d", len(r.Namespaces), r.Omitted, len(r2.Namespaces), r2.Omitted)
		}
	})
}
