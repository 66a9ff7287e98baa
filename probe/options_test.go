package probe

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

const validResources = `[
 {"ref":{"kind":"Deployment","name":"kube-controller-manager","apiVersion":"apps/v1"},"optional":false,
  "scaleUp":{"level":1,"initialDelay":"10s","timeout":"60s"},"scaleDown":{"level":0,"initialDelay":"15s","timeout":"45s"}},
 {"ref":{"kind":"Deployment","name":"machine-controller-manager","apiVersion":"apps/v1"},"optional":false,
  "scaleUp":{"level":1},"scaleDown":{"level":1}},
 {"ref":{"kind":"Deployment","name":"cluster-autoscaler","apiVersion":"apps/v1"},"optional":true,
  "scaleUp":{"level":0},"scaleDown":{"level":2}}
]`

func validEnv() map[string]string {
	return map[string]string{
		"NAMESPACE":                       testNS,
		"KUBECONFIG_SECRET_NAME":          testSecret,
		"KCM_NODE_MONITOR_GRACE_DURATION": "40s",
		"DEPENDENT_RESOURCES":             validResources,
	}
}

func lookupFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	var ce *envconf.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *envconf.ConfigError, got %v", err)
	}
	return ce.Problems
}

func TestLoadOptionsMinimalEnvGetsDefaults(t *testing.T) {
	o, err := LoadOptions(lookupFrom(validEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if o.Namespace != testNS || o.KubeconfigSecretName != testSecret {
		t.Errorf("names: %q %q", o.Namespace, o.KubeconfigSecretName)
	}
	if o.ProbeTimeout != 30*time.Second || o.NodeMonitorGrace != 40*time.Second {
		t.Errorf("durations: %v %v", o.ProbeTimeout, o.NodeMonitorGrace)
	}
	if o.NodeLeaseFailureFraction != 0.6 || o.LeaseExpiryBufferFraction != 0.75 {
		t.Errorf("fractions: %v %v", o.NodeLeaseFailureFraction, o.LeaseExpiryBufferFraction)
	}
	if o.DryRun || o.Schedule != nil || o.RunDuration != 0 {
		t.Errorf("default must be a single, real probe: %+v", o)
	}
	want := []DependentResource{
		{Ref: ResourceRef{"Deployment", "kube-controller-manager", "apps/v1"},
			ScaleUp: ScaleInfo{1, 10 * time.Second, 60 * time.Second}, ScaleDown: ScaleInfo{0, 15 * time.Second, 45 * time.Second}},
		{Ref: ResourceRef{"Deployment", "machine-controller-manager", "apps/v1"},
			ScaleUp: ScaleInfo{1, 0, 30 * time.Second}, ScaleDown: ScaleInfo{1, 0, 30 * time.Second}},
		{Ref: ResourceRef{"Deployment", "cluster-autoscaler", "apps/v1"}, Optional: true,
			ScaleUp: ScaleInfo{0, 0, 30 * time.Second}, ScaleDown: ScaleInfo{2, 0, 30 * time.Second}},
	}
	if len(o.Resources) != len(want) {
		t.Fatalf("resources: %+v", o.Resources)
	}
	for i := range want {
		if o.Resources[i] != want[i] {
			t.Errorf("resource %d = %+v, want %+v", i, o.Resources[i], want[i])
		}
	}
}

func TestLoadOptionsAcceptsEveryValidSetting(t *testing.T) {
	env := validEnv()
	env["PROBE_TIMEOUT"] = "5s"
	env["NODE_LEASE_FAILURE_FRACTION"] = "1"
	env["LEASE_EXPIRY_BUFFER_FRACTION"] = "0.5"
	env["DRY_RUN"] = "true"
	env["SCHEDULE"] = "*/10 * * * * *"
	env["RUN_DURATION"] = "10m"
	o, err := LoadOptions(lookupFrom(env))
	if err != nil {
		t.Fatal(err)
	}
	if o.ProbeTimeout != 5*time.Second || o.NodeLeaseFailureFraction != 1 || o.LeaseExpiryBufferFraction != 0.5 ||
		!o.DryRun || o.Schedule == nil || o.ScheduleSpec != "*/10 * * * * *" || o.RunDuration != 10*time.Minute {
		t.Errorf("options: %+v", o)
	}
	for _, spec := range []string{"@every 30s", "*/5 * * * *", "@hourly"} {
		env["SCHEDULE"] = spec
		if _, err := LoadOptions(lookupFrom(env)); err != nil {
			t.Errorf("SCHEDULE=%q: %v", spec, err)
		}
	}
}

func TestLoadOptionsRejectsEachBadValue(t *testing.T) {
	tests := []struct {
		name, variable, value string
		unset                 bool
		want                  string // a substring of the one problem
	}{
		{"NAMESPACE unset", "NAMESPACE", "", true, "NAMESPACE: required"},
		{"NAMESPACE empty", "NAMESPACE", "", false, `NAMESPACE="": required, must not be empty`},
		{"NAMESPACE invalid", "NAMESPACE", "Shoot_NS", false, `NAMESPACE="Shoot_NS": not a valid namespace name`},
		{"KUBECONFIG_SECRET_NAME unset", "KUBECONFIG_SECRET_NAME", "", true, "KUBECONFIG_SECRET_NAME: required"},
		{"KUBECONFIG_SECRET_NAME invalid", "KUBECONFIG_SECRET_NAME", "a/b", false, `KUBECONFIG_SECRET_NAME="a/b": not a valid Secret name`},
		{"PROBE_TIMEOUT not a duration", "PROBE_TIMEOUT", "30", false, `PROBE_TIMEOUT="30": must be a Go duration`},
		{"PROBE_TIMEOUT zero", "PROBE_TIMEOUT", "0s", false, `PROBE_TIMEOUT="0s": must be greater than 0`},
		{"PROBE_TIMEOUT negative", "PROBE_TIMEOUT", "-1s", false, `PROBE_TIMEOUT="-1s": must be greater than 0`},
		{"PROBE_TIMEOUT empty", "PROBE_TIMEOUT", "", false, `PROBE_TIMEOUT="": must not be empty`},
		{"grace unset", "KCM_NODE_MONITOR_GRACE_DURATION", "", true, "KCM_NODE_MONITOR_GRACE_DURATION: required"},
		{"grace bad", "KCM_NODE_MONITOR_GRACE_DURATION", "forty", false, `KCM_NODE_MONITOR_GRACE_DURATION="forty": must be a Go duration`},
		{"grace zero", "KCM_NODE_MONITOR_GRACE_DURATION", "0s", false, `KCM_NODE_MONITOR_GRACE_DURATION="0s": must be greater than 0`},
		{"grace shorter than a lease renewal", "KCM_NODE_MONITOR_GRACE_DURATION", "1ns", false, `KCM_NODE_MONITOR_GRACE_DURATION="1ns": must be at least 10s`},
		{"failure fraction NaN", "NODE_LEASE_FAILURE_FRACTION", "NaN", false, `NODE_LEASE_FAILURE_FRACTION="NaN": must be a number greater than 0 and at most 1`},
		{"failure fraction 0", "NODE_LEASE_FAILURE_FRACTION", "0", false, `NODE_LEASE_FAILURE_FRACTION="0": must be a number`},
		{"failure fraction above 1", "NODE_LEASE_FAILURE_FRACTION", "1.01", false, `NODE_LEASE_FAILURE_FRACTION="1.01": must be a number`},
		{"failure fraction Inf", "NODE_LEASE_FAILURE_FRACTION", "+Inf", false, `NODE_LEASE_FAILURE_FRACTION="+Inf": must be a number`},
		{"failure fraction text", "NODE_LEASE_FAILURE_FRACTION", "60%", false, `NODE_LEASE_FAILURE_FRACTION="60%": must be a number`},
		{"buffer fraction NaN", "LEASE_EXPIRY_BUFFER_FRACTION", "nan", false, `LEASE_EXPIRY_BUFFER_FRACTION="nan": must be a number`},
		{"buffer fraction negative", "LEASE_EXPIRY_BUFFER_FRACTION", "-0.5", false, `LEASE_EXPIRY_BUFFER_FRACTION="-0.5": must be a number`},
		{"buffer fraction 2", "LEASE_EXPIRY_BUFFER_FRACTION", "2", false, `LEASE_EXPIRY_BUFFER_FRACTION="2": must be a number`},
		{"DEPENDENT_RESOURCES unset", "DEPENDENT_RESOURCES", "", true, "DEPENDENT_RESOURCES: required"},
		{"DEPENDENT_RESOURCES not JSON", "DEPENDENT_RESOURCES", "- ref: x", false, `DEPENDENT_RESOURCES="- ref: x": not valid JSON`},
		{"DEPENDENT_RESOURCES empty list", "DEPENDENT_RESOURCES", "[]", false, `DEPENDENT_RESOURCES: required, must list at least one`},
		{"DEPENDENT_RESOURCES object", "DEPENDENT_RESOURCES", `{"ref":{}}`, false, `DEPENDENT_RESOURCES={"ref":{}}: must be a list`},
		{"DRY_RUN yes", "DRY_RUN", "yes", false, `DRY_RUN="yes": must be one of`},
		{"DRY_RUN empty", "DRY_RUN", "", false, `DRY_RUN="": must not be empty`},
		{"SCHEDULE garbage", "SCHEDULE", "every minute", false, `SCHEDULE="every minute": not a valid cron schedule`},
		{"SCHEDULE time-zone panic in robfig/cron", "SCHEDULE", "TZ=UTC", false, `SCHEDULE="TZ=UTC": not a valid cron schedule`},
		{"SCHEDULE never fires", "SCHEDULE", "0 0 30 2 *", false, `SCHEDULE="0 0 30 2 *": never fires`},
		{"RUN_DURATION without SCHEDULE", "RUN_DURATION", "10m", false, `RUN_DURATION="10m": only valid with SCHEDULE`},
		{"RUN_DURATION bad", "RUN_DURATION", "ten", false, `RUN_DURATION="ten": must be a Go duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := validEnv()
			if tt.unset {
				delete(env, tt.variable)
			} else {
				env[tt.variable] = tt.value
			}
			if tt.variable == "SCHEDULE" {
				env["RUN_DURATION"] = "1m"
			}
			_, err := LoadOptions(lookupFrom(env))
			p := problemsOf(t, err)
			if len(p) != 1 || !strings.Contains(p[0], tt.want) {
				t.Errorf("problems = %q, want exactly one containing %q", p, tt.want)
			}
		})
	}
}

func TestLoadOptionsScheduleNeedsRunDuration(t *testing.T) {
	env := validEnv()
	env["SCHEDULE"] = "@every 10s"
	p := problemsOf(t, func() error { _, err := LoadOptions(lookupFrom(env)); return err }())
	if len(p) != 1 || !strings.HasPrefix(p[0], "RUN_DURATION: required with SCHEDULE") {
		t.Errorf("problems = %q", p)
	}
	env["SCHEDULE"], env["RUN_DURATION"] = "", "" // empty = unset: a single probe
	if o, err := LoadOptions(lookupFrom(env)); err != nil || o.Schedule != nil {
		t.Errorf("empty SCHEDULE and RUN_DURATION: %v %+v", err, o)
	}
}

func TestLoadOptionsReportsEveryProblemAtOnce(t *testing.T) {
	env := map[string]string{
		"NAMESPACE":                    "Bad_NS",
		"PROBE_TIMEOUT":                "soon",
		"NODE_LEASE_FAILURE_FRACTION":  "NaN",
		"LEASE_EXPIRY_BUFFER_FRACTION": "0",
		"DEPENDENT_RESOURCES":          `[{"ref":{"kind":"Deployment","apiVersion":"apps/v1"},"scaleUp":{"level":"x"},"scaleDown":{"level":0,"timeout":"0s"}}]`,
		"DRY_RUN":                      "maybe",
		"SCHEDULE":                     "@every 10s",
	}
	p := problemsOf(t, func() error { _, err := LoadOptions(lookupFrom(env)); return err }())
	want := []string{
		`NAMESPACE="Bad_NS"`,
		"KUBECONFIG_SECRET_NAME: required",
		`PROBE_TIMEOUT="soon"`,
		"KCM_NODE_MONITOR_GRACE_DURATION: required",
		`NODE_LEASE_FAILURE_FRACTION="NaN"`,
		`LEASE_EXPIRY_BUFFER_FRACTION="0"`,
		`DEPENDENT_RESOURCES[0].scaleUp.level="x"`, // what does not decode, then what is wrong with what does
		"DEPENDENT_RESOURCES[0].ref.name: required",
		`DEPENDENT_RESOURCES[0].scaleDown.timeout="0s"`,
		`DRY_RUN="maybe"`,
		"RUN_DURATION: required with SCHEDULE",
	}
	if len(p) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(p), len(want), strings.Join(p, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(p[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, p[i], want[i])
		}
	}
	if msg := (&envconf.ConfigError{Problems: p}).Error(); strings.Count(msg, "\n") != len(p)-1 {
		t.Errorf("one problem per line:\n%s", msg)
	}
}

func TestDependentResourcesNameTheOffendingPath(t *testing.T) {
	const ok = `{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}`
	tests := []struct {
		name, json string
		want       string
	}{
		{"entry not an object", `[` + ok + `, 7]`, "DEPENDENT_RESOURCES[1]=7: must be an object"},
		{"entry null", `[null]`, "DEPENDENT_RESOURCES[0]: required"},
		{"ref missing", `[{"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].ref: required"},
		{"kind missing", `[{"ref":{"name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].ref.kind: required"},
		{"kind not a kind", `[{"ref":{"kind":"apps/Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].ref.kind="apps/Deployment": not a valid kind`},
		{"name empty", `[{"ref":{"kind":"Deployment","name":"","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].ref.name: required, must be a non-empty string"},
		{"name invalid", `[{"ref":{"kind":"Deployment","name":"KCM!","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].ref.name="KCM!": not a valid object name`},
		{"name a number", `[{"ref":{"kind":"Deployment","name":5,"apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].ref.name=5: must be a string"},
		{"apiVersion missing", `[{"ref":{"kind":"Deployment","name":"kcm"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].ref.apiVersion: required"},
		{"apiVersion invalid", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1/x"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].ref.apiVersion="apps/v1/x": not a valid apiVersion`},
		{"apiVersion without version", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].ref.apiVersion="apps/": not a valid apiVersion`},
		{"optional not a bool", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"optional":"yes","scaleUp":{"level":0},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].optional="yes": must be true or false`},
		{"scaleDown not an object", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":1}]`, "DEPENDENT_RESOURCES[0].scaleDown=1: must be an object"},
		{"level fractional", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":1.5},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].scaleUp.level=1.5: must be an integer"},
		{"level a string", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":"0"},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].scaleUp.level="0": must be an integer`},
		{"level huge", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":99999999999},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].scaleUp.level=99999999999: must be an integer"},
		{"initialDelay not a duration", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0,"initialDelay":"10"},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].scaleUp.initialDelay="10": must be a Go duration string`},
		{"initialDelay a number", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0,"initialDelay":10},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].scaleUp.initialDelay=10: must be a Go duration string"},
		{"initialDelay negative", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0,"initialDelay":"-1s"},"scaleDown":{"level":0}}]`, `DEPENDENT_RESOURCES[0].scaleUp.initialDelay="-1s": must not be negative`},
		{"timeout zero", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0,"timeout":"0s"}}]`, `DEPENDENT_RESOURCES[0].scaleDown.timeout="0s": must be greater than 0`},
		{"unknown field (typo)", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0,"initalDelay":"5s"},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].scaleUp.initalDelay: unknown field (did you mean initialDelay?)"},
		{"unknown top-level field", `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"shouldExist":true,"scaleUp":{"level":0},"scaleDown":{"level":0}}]`, "DEPENDENT_RESOURCES[0].shouldExist: unknown field"},
		{"duplicate resource", `[` + ok + `,` + ok + `]`, "DEPENDENT_RESOURCES[1].ref: Deployment/kcm is already listed as DEPENDENT_RESOURCES[0]"},
		{"trailing data", `[` + ok + `] x`, `DEPENDENT_RESOURCES="[{\"ref`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := validEnv()
			env["DEPENDENT_RESOURCES"] = tt.json
			p := problemsOf(t, func() error { _, err := LoadOptions(lookupFrom(env)); return err }())
			if len(p) != 1 || !strings.HasPrefix(p[0], tt.want) {
				t.Errorf("problems = %q\nwant exactly one starting with %q", p, tt.want)
			}
		})
	}
}

func TestDependentResourcesAcceptNullOptionalFieldsAndCustomKinds(t *testing.T) {
	res, err := ParseDependentResources([]byte(`[{"ref":{"kind":"Widget","name":"w","apiVersion":"example.io/v1"},"optional":null,
		"scaleUp":{"level":3,"initialDelay":null,"timeout":null},"scaleDown":{"level":0,"initialDelay":"0s","timeout":"1m30s"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := DependentResource{Ref: ResourceRef{"Widget", "w", "example.io/v1"},
		ScaleUp: ScaleInfo{3, 0, 30 * time.Second}, ScaleDown: ScaleInfo{0, 0, 90 * time.Second}}
	if len(res) != 1 || res[0] != want {
		t.Errorf("got %+v", res)
	}
	if _, err := ParseDependentResources([]byte(`[]`)); err == nil || !strings.Contains(err.Error(), "dependentResourceInfos") {
		t.Errorf("ParseDependentResources names its own root: %v", err)
	}
}

func TestUsageListsEverySettingWithItsDefault(t *testing.T) {
	var b bytes.Buffer
	Usage(&b)
	out := b.String()
	for _, s := range settings {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, s.Name+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("Usage does not list %s", s.Name)
			continue
		}
		want := s.Default
		if s.Required {
			want = "(required)"
		} else if want == "" {
			want = "(unset)"
		}
		if !strings.Contains(line, want) {
			t.Errorf("Usage line of %s lacks its default %q: %q", s.Name, want, line)
		}
	}
}

// FuzzDependentResources: any DEPENDENT_RESOURCES value is parsed without panicking, and what
// is accepted is valid.
func FuzzDependentResources(f *testing.F) {
	f.Add(validResources)
	f.Add(`[]`)
	f.Add(`[null]`)
	f.Add(`[{"ref":{"kind":"Widget","name":"w","apiVersion":"example.io/v1"},"scaleUp":{"level":0},"scaleDown":{"level":1,"timeout":"1s"}}]`)
	f.Add(`[{"ref":{"kind":"Deployment","name":"a","apiVersion":"apps/v1"},"scaleUp":{"level":1e400},"scaleDown":{"level":-0}}]`)
	f.Add(`[{"ref":"x","scaleUp":[],"scaleDown":{"initialDelay":"9223372036854775807ns"}}]`)
	f.Add("\xff[")
	f.Fuzz(func(t *testing.T, s string) {
		res, problems := parseDependentResources([]byte(s), "DEPENDENT_RESOURCES")
		if len(problems) > 0 {
			if res != nil {
				t.Fatalf("problems and resources at once: %q", problems)
			}
			for _, p := range problems {
				if !strings.HasPrefix(p, "DEPENDENT_RESOURCES") {
					t.Fatalf("problem does not name its path: %q", p)
				}
			}
			return
		}
		if len(res) == 0 {
			t.Fatal("accepted an empty list")
		}
		for _, r := range res {
			if r.Ref.Kind == "" || r.Ref.Name == "" || r.Ref.APIVersion == "" || r.ScaleUp.Level < 0 || r.ScaleDown.Level < 0 ||
				r.ScaleUp.Timeout <= 0 || r.ScaleDown.Timeout <= 0 || r.ScaleUp.InitialDelay < 0 || r.ScaleDown.InitialDelay < 0 {
				t.Fatalf("accepted an invalid resource: %+v", r)
			}
		}
	})
}

// dependency-watchdog's zero values: an absent scaleUp, scaleDown or level is level 0 with
// the default delay and timeout; levels only order resources, so a negative one is accepted
// and runs first.
func TestDependentResourcesDefaultAbsentScaleInfoAndAcceptAnyLevel(t *testing.T) {
	res, err := ParseDependentResources([]byte(`[
	  {"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"}},
	  {"ref":{"kind":"Deployment","name":"mcm","apiVersion":"apps/v1"},"scaleUp":{},"scaleDown":{"level":-2}}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := ScaleInfo{Level: 0, InitialDelay: DefaultScaleInitialDelay, Timeout: DefaultScaleTimeout}
	if res[0].ScaleUp != want || res[0].ScaleDown != want || res[1].ScaleUp != want {
		t.Errorf("absent scale infos = %+v %+v %+v, want %+v", res[0].ScaleUp, res[0].ScaleDown, res[1].ScaleUp, want)
	}
	if res[1].ScaleDown.Level != -2 {
		t.Errorf("negative level = %d, want -2", res[1].ScaleDown.Level)
	}
}

// The probe's own environment is read strictly: a field dependency-watchdog's types do not
// have is refused, named by its path (the coordinator, reading gardenlet's ConfigMap, warns
// instead and hands the Job the list without it).
func TestUnknownDependentResourceFieldsAreRefusedByPath(t *testing.T) {
	doc := []byte(`[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1","extra":1},"shouldExist":true,"scaleUp":{"level":1,"retries":3},"scaleDown":{"level":0}}]`)
	_, err := ParseDependentResources(doc)
	if err == nil {
		t.Fatal("strict parsing must refuse unknown fields")
	}
	for _, w := range []string{"dependentResourceInfos[0].ref.extra", "dependentResourceInfos[0].scaleUp.retries", "dependentResourceInfos[0].shouldExist"} {
		if !strings.Contains(err.Error(), w+": unknown field") {
			t.Errorf("no problem for %s in %q", w, err)
		}
	}
}

// The coordinator hands its Jobs EncodeDependentResources' output: it parses back (strictly)
// to the same resources.
func TestEncodeDependentResourcesRoundTrips(t *testing.T) {
	in := []DependentResource{
		{Ref: ResourceRef{Kind: "Deployment", Name: "kcm", APIVersion: "apps/v1"}, ScaleUp: ScaleInfo{Level: 1, InitialDelay: 30 * time.Second, Timeout: time.Minute}, ScaleDown: ScaleInfo{Level: 0, Timeout: 40 * time.Second}},
		{Ref: ResourceRef{Kind: "Widget", Name: "w", APIVersion: "example.io/v1"}, Optional: true, ScaleUp: ScaleInfo{Level: -1, Timeout: time.Second}, ScaleDown: ScaleInfo{Level: 2, InitialDelay: time.Second, Timeout: time.Second}},
	}
	out, err := ParseDependentResources([]byte(EncodeDependentResources(in)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, in) {
		t.Errorf("round trip: %+v, want %+v", out, in)
	}
}
