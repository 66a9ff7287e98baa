package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// jsonLines parses every line of out as one JSON object, failing on a line that is not.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a line that is not JSON: %q (%v)\nall:\n%s", line, err, out)
		}
		lines = append(lines, m)
	}
	return lines
}

// With LOG_FORMAT=json, what client-go logs through klog (plain, structured, warnings,
// errors, at the verbosity LOG_LEVEL opens) comes out as JSON lines with the keys of
// depwatch's own lines, at its severity, instead of klog's text on stderr: every line of a
// pod's log parses in one format.
func TestKlogLinesComeOutInDepwatchsJSONFormat(t *testing.T) {
	t.Cleanup(klog.ClearLogger)
	env := map[string]string{"LOG_FORMAT": "json", "LOG_LEVEL": "debug"}
	log, _, err := newLogger(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, false)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log.SetOutput(&out)

	log.WithField("service", "shoot--a/etcd-main-client").Info("depwatch's own line")
	klog.Info("Attempting to acquire leader lease depwatch/depwatch-coordinator...")
	klog.InfoS("Successfully acquired lease", "lock", "depwatch/depwatch-coordinator", "took", 1500*time.Millisecond)
	klog.Warningf("throttled %d times", 3)
	klog.ErrorS(errors.New("connection refused"), "Failed to watch", "pod", klog.KRef("shoot--a", "kube-apiserver-0"))
	klog.V(2).InfoS("a debug detail", "n", 1)
	klog.V(7).InfoS("beyond what debug opens")
	klog.Background().WithName("leaderelection").Info("contextual", "k", "v")

	lines := jsonLines(t, out.String())
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7 (the V(7) line left out):\n%s", len(lines), out.String())
	}
	own := lines[0]
	for _, key := range []string{"time", "level", "msg"} {
		if _, ok := own[key]; !ok {
			t.Fatalf("depwatch's own line lacks %q: %v", key, own)
		}
	}
	for _, c := range []struct {
		line   int
		level  string
		msg    string
		fields map[string]any
	}{
		{1, "info", "Attempting to acquire leader lease depwatch/depwatch-coordinator...", map[string]any{"logger": "klog"}},
		{2, "info", "Successfully acquired lease", map[string]any{"lock": "depwatch/depwatch-coordinator", "took": "1.5s", "logger": "klog"}},
		{3, "warning", "throttled 3 times", nil},
		{4, "error", "Failed to watch", map[string]any{"error": "connection refused", "pod": map[string]any{"name": "kube-apiserver-0", "namespace": "shoot--a"}}},
		{5, "debug", "a debug detail", map[string]any{"n": float64(1)}},
		{6, "info", "contextual", map[string]any{"k": "v", "logger": "klog/leaderelection"}},
	} {
		got := lines[c.line]
		for key := range own {
			if key == "service" {
				continue // the own line's field
			}
			if _, ok := got[key]; !ok {
				t.Errorf("klog line %d lacks depwatch's key %q: %v", c.line, key, got)
			}
		}
		if got["level"] != c.level || got["msg"] != c.msg {
			t.Errorf("klog line %d: level %v msg %q, want %s %q", c.line, got["level"], got["msg"], c.level, c.msg)
		}
		for k, v := range c.fields {
			if b, _ := json.Marshal(got[k]); string(b) != mustJSON(v) {
				t.Errorf("klog line %d: %s = %s, want %s", c.line, k, b, mustJSON(v))
			}
		}
		if ts, _ := got["time"].(string); ts == "" {
			t.Errorf("klog line %d has no time: %v", c.line, got)
		} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("klog line %d: time %q is not RFC 3339: %v", c.line, ts, err)
		}
	}
	if keys := slices.Sorted(maps.Keys(own)); !slices.Equal(keys, []string{"level", "msg", "service", "time"}) {
		t.Errorf("depwatch's own json line has keys %v", keys)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Every format keeps its keys for klog's lines too: Fluentd's severity and message, and the
// json format's time to the nanosecond where Logrus keeps pod-reaper's seconds.
func TestKlogLinesFollowEveryLogFormat(t *testing.T) {
	t.Cleanup(klog.ClearLogger)
	for _, tc := range []struct {
		format    string
		keys      []string
		nanoTimes bool
	}{
		{"json", []string{"time", "level", "msg"}, true},
		{"Logrus", []string{"time", "level", "msg"}, false},
		{"Fluentd", []string{"time", "severity", "message"}, true},
	} {
		t.Run(tc.format, func(t *testing.T) {
			log, _, err := newLogger(func(k string) (string, bool) {
				if k == "LOG_FORMAT" {
					return tc.format, true
				}
				return "", false
			}, false)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			log.SetOutput(&out)
			klog.InfoS("from client-go", "k", "v")
			lines := jsonLines(t, out.String())
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1:\n%s", len(lines), out.String())
			}
			for _, k := range tc.keys {
				if _, ok := lines[0][k]; !ok {
					t.Errorf("%s: the klog line lacks %q: %v", tc.format, k, lines[0])
				}
			}
			ts, _ := lines[0]["time"].(string)
			if got := strings.Contains(ts, "."); got != tc.nanoTimes {
				t.Errorf("%s: time %q: fractional seconds %v, want %v", tc.format, ts, got, tc.nanoTimes)
			}
		})
	}
}
