//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// promServer is a real Prometheus (Debian's binary, installed by hack/install-prometheus.sh)
// started by a test: on a free loopback port, with its data under _output, stopped and
// removed when the test ends.
type promServer struct {
	t    *testing.T
	addr string
}

// startPrometheus runs prometheus with this config (prometheus.yml) and these rule files
// (name → content, written beside it), and waits until it is ready.
func startPrometheus(t *testing.T, config string, rules map[string]string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus binary (Debian's prometheus package; hack/install-prometheus.sh installs it): %v", err)
	}
	out := filepath.Join(repoRoot, "_output")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(out, "e2e-prometheus-")
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range rules {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &promServer{t: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr, "--log.level=warn")
	cmd.Dir = dir
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Logf("prometheus (pid %d) on %s, data in %s", cmd.Process.Pid, p.addr, dir)
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
		_ = os.RemoveAll(dir)
	})
	waitFor(t, time.Minute, "prometheus to be ready", func() (bool, error) {
		resp, err := http.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return p
}

// promSeries is one series of a query's result: its labels and its values (one for an
// instant query, one per step for a range query).
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// query evaluates expr now (instant query).
func (p *promServer) query(expr string) ([]promSeries, error) {
	return p.api("/api/v1/query", url.Values{"query": {expr}})
}

// queryRange evaluates expr at every step from start to now, as a dashboard panel does.
func (p *promServer) queryRange(expr string, start time.Time, step time.Duration) ([]promSeries, error) {
	return p.api("/api/v1/query_range", url.Values{"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(time.Now().Unix(), 10)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
}

func (p *promServer) api(path string, params url.Values) ([]promSeries, error) {
	resp, err := http.PostForm("http://"+p.addr+path, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s %q: %s", path, params.Get("query"), body.Error)
	}
	return body.Data.Result, nil
}

// alerts are the alerts with this name in this state (firing, pending) now, matching the
// label selector (e.g. `namespace="x"`, or "").
func (p *promServer) alerts(name, state, selector string) []promSeries {
	p.t.Helper()
	sel := fmt.Sprintf(`ALERTS{alertname=%q, alertstate=%q`, name, state)
	if selector != "" {
		sel += ", " + selector
	}
	res, err := p.query(sel + "}")
	if err != nil {
		p.t.Logf("reading the alerts: %v", err)
	}
	return res
}

// waitAlert waits until the alert is firing (firing true) or neither firing nor pending.
func (p *promServer) waitAlert(timeout time.Duration, name, selector string, firing bool) time.Time {
	p.t.Helper()
	what := fmt.Sprintf("alert %s{%s} to fire", name, selector)
	if !firing {
		what = fmt.Sprintf("alert %s{%s} to clear", name, selector)
	}
	waitFor(p.t, timeout, what, func() (bool, error) {
		if firing {
			return len(p.alerts(name, "firing", selector)) > 0, nil
		}
		return len(p.alerts(name, "firing", selector))+len(p.alerts(name, "pending", selector)) == 0, nil
	})
	return time.Now()
}

// describe shows a result briefly, for a failure message.
func describe(res []promSeries) string {
	var b strings.Builder
	for i, s := range res {
		if i == 5 {
			fmt.Fprintf(&b, " … (%d series)", len(res))
			break
		}
		fmt.Fprintf(&b, " %v", s.Metric)
	}
	return b.String()
}
