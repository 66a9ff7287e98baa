package apilimit

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/depwatch/depwatch/internal/envconf"
)

func TestReadRefusesWhatNoClientCanUseAndWriteReadsBack(t *testing.T) {
	for _, tc := range []struct {
		name, qps, burst string
		want             Limit
		problem          string
	}{
		{name: "unset stays unset", want: Limit{}},
		{name: "both", qps: "200", burst: "500", want: Limit{QPS: 200, Burst: 500}},
		{name: "a fraction of a request a second", qps: "0.5", want: Limit{QPS: 0.5}},
		{name: "zero QPS", qps: "0", problem: `Q="0": must be a number of requests a second`},
		{name: "NaN", qps: "NaN", problem: `Q="NaN"`},
		{name: "a burst of none", burst: "0", problem: `B="0": must be an integer from 1`},
		{name: "a fractional burst", burst: "1.5", problem: `B="1.5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			if tc.qps != "" {
				env["Q"] = tc.qps
			}
			if tc.burst != "" {
				env["B"] = tc.burst
			}
			r := envconf.Reader{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
			got := Read(&r, "Q", "B")
			if tc.problem != "" {
				if len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0], tc.problem) {
					t.Errorf("problems %q, want one starting %q", r.Problems, tc.problem)
				}
				return
			}
			if len(r.Problems) > 0 || got != tc.want {
				t.Fatalf("Read = %+v, %q; want %+v", got, r.Problems, tc.want)
			}
			var w envconf.Writer
			got.Write(&w, "Q", "B")
			back := Read(&envconf.Reader{Lookup: envconf.LookupIn(w.Env())}, "Q", "B")
			if back != got {
				t.Errorf("written %v, read back %+v", w.Env(), back)
			}
		})
	}
}

func TestApplySetsOnlyWhatIsSetOnACopy(t *testing.T) {
	cfg := &rest.Config{Host: "h", QPS: 1, Burst: 2}
	out := Limit{QPS: 50}.Apply(cfg)
	if out.QPS != 50 || out.Burst != 2 || cfg.QPS != 1 {
		t.Errorf("Apply = %v/%d, original now %v", out.QPS, out.Burst, cfg.QPS)
	}
	if got := (Limit{}).Or(Default); got != Default {
		t.Errorf("unset Or default = %+v", got)
	}
}

// Every client built from a Shared config, or from a copy of it (with Apply's limits too),
// holds the one limiter: they spend one budget together. Two Shared configs have two.
func TestSharedGivesEveryClientOfTheConfigOneLimiter(t *testing.T) {
	base := &rest.Config{Host: "https://127.0.0.1:1"}
	shared := Limit{QPS: 20, Burst: 100}.Shared(base)
	if base.RateLimiter != nil {
		t.Fatal("Shared changed the config it was given")
	}
	if shared.QPS != 20 || shared.Burst != 100 || shared.RateLimiter == nil || shared.RateLimiter.QPS() != 20 {
		t.Fatalf("shared config %v/%d, limiter %v", shared.QPS, shared.Burst, shared.RateLimiter)
	}
	for name, cfg := range map[string]*rest.Config{
		"the config":                    shared,
		"a copy":                        rest.CopyConfig(shared),
		"a copy with a run's own limit": Limit{QPS: 500, Burst: 1000}.Apply(shared),
	} {
		c, err := rest.RESTClientFor(withGroup(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if c.GetRateLimiter() != shared.RateLimiter {
			t.Errorf("%s: a client of its own limiter", name)
		}
	}
	if other := (Limit{}).Shared(base); other.RateLimiter == shared.RateLimiter || other.RateLimiter.QPS() != float32(Default.QPS) {
		t.Errorf("an unset limit shares another's limiter or is not client-go's default: %v", other.RateLimiter.QPS())
	}
}

// withGroup is cfg as rest.RESTClientFor needs it: a group version and a serializer.
func withGroup(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.GroupVersion = &schema.GroupVersion{Version: "v1"}
	out.APIPath = "/api"
	out.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return out
}
