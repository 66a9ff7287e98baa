package apilimit

import (
	"strings"
	"testing"

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
