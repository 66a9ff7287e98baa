package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// TestFluentdFormatMatchesPodReapersFieldsAndSeverities: LOG_FORMAT=Fluentd writes the keys
// and severity names pod-reaper's Fluentd format writes (dashboards match on them), keeps
// depwatch's own fields, and never loses one to a collision.
func TestFluentdFormatMatchesPodReapersFieldsAndSeverities(t *testing.T) {
	tests := []struct {
		level        logrus.Level
		wantSeverity string
	}{
		{logrus.InfoLevel, "info"},
		{logrus.WarnLevel, "warn"},
		{logrus.ErrorLevel, "error"},
		{logrus.DebugLevel, "debug"},
		{logrus.TraceLevel, "trace"},
		{logrus.FatalLevel, "fatal"},
		{logrus.PanicLevel, "fatal"},
	}
	for _, tc := range tests {
		t.Run(tc.level.String(), func(t *testing.T) {
			at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
			e := &logrus.Entry{Level: tc.level, Message: "reaping pod", Time: at, Data: logrus.Fields{
				"pod": "p", "namespace": "n", "reasons": []string{"r"}, "error": errors.New("boom"), "message": "clash",
			}}
			b, err := fluentdFormatter{}.Format(e)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil || !bytes.HasSuffix(b, []byte("\n")) {
				t.Fatalf("not one JSON line: %q (%v)", b, err)
			}
			want := map[string]any{
				"severity": tc.wantSeverity, "message": "reaping pod", "time": "2026-03-01T12:00:00.123456789Z",
				"pod": "p", "namespace": "n", "error": "boom", "fields.message": "clash",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, b)
				}
			}
			for _, k := range []string{"level", "msg"} {
				if _, ok := got[k]; ok {
					t.Errorf("Fluentd line has logrus key %q: %s", k, b)
				}
			}
		})
	}
}

// TestReapTakesUnknownLogSettingsAsPodReaperDoes: pod-reaper logs an unknown LOG_LEVEL or
// LOG_FORMAT and runs at info level as JSON; `depwatch reap` does the same (with a warning),
// while the other commands still refuse them.
func TestReapTakesUnknownLogSettingsAsPodReaperDoes(t *testing.T) {
	env := map[string]string{"LOG_LEVEL": "loud", "LOG_FORMAT": "xml"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	log, warnings, err := newLogger(lookup, true)
	if err != nil || len(warnings) != 2 {
		t.Fatalf("newLenientLogger = %v, %q; want a logger and two warnings", err, warnings)
	}
	if log.GetLevel() != logrus.InfoLevel {
		t.Errorf("level %v, want info", log.GetLevel())
	}
	if _, ok := log.Formatter.(*logrus.JSONFormatter); !ok {
		t.Errorf("formatter %T, want Logrus JSON", log.Formatter)
	}
	if _, _, err := newLogger(lookup, false); err == nil {
		t.Error("the strict logger (coordinator, probe) accepted LOG_LEVEL=loud and LOG_FORMAT=xml")
	}
}
