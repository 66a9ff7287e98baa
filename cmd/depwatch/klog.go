package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	stdlog "log"
	"maps"
	"strings"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
)

// routeLibraryLogs sends what client-go and the standard library log into log, so that every
// line of a depwatch pod's log is in the one format LOG_FORMAT chose: client-go logs through
// klog (leader election, reflectors, throttling, the API server's warnings), which would
// otherwise write its own text lines to stderr, and net/http's servers through the standard
// logger. The process has one logger, so this is set once per logger built, the last wins.
func routeLibraryLogs(log *logrus.Logger) {
	klog.SetLoggerWithOptions(logr.New(&logrusSink{log: log, name: "klog"}),
		klog.ContextualLogger(true), // client-go's contextual loggers (klog.FromContext) too
		klog.WriteKlogBuffer(func(line []byte) { klogLine(log, line) }))
	// klog decides V(n) itself, before the sink sees it: open it as far as LOG_LEVEL asks.
	// Setting any klog.Level sets the process's verbosity, as its -v flag does.
	v := "0"
	switch {
	case log.IsLevelEnabled(logrus.TraceLevel):
		v = "6" // client-go's request and response lines
	case log.IsLevelEnabled(logrus.DebugLevel):
		v = "2"
	}
	_ = new(klog.Level).Set(v)
	stdlog.SetFlags(0)
	stdlog.SetOutput(stdlogWriter{log})
}

// klogLine logs one of klog's unstructured lines (klog.Info, Warning, Errorf...), which it
// hands over with its text header ("W1126 09:46:47.774031   7328 file.go:258] message"), at
// the header's severity and without the header.
func klogLine(log *logrus.Logger, line []byte) {
	line = bytes.TrimRight(line, "\n")
	level := logrus.InfoLevel
	if len(line) > 0 {
		switch line[0] {
		case 'W':
			level = logrus.WarnLevel
		case 'E', 'F':
			level = logrus.ErrorLevel
		}
	}
	if _, msg, ok := bytes.Cut(line, []byte("] ")); ok && len(line) > 0 && strings.ContainsRune("IWEF", rune(line[0])) {
		line = msg
	}
	log.WithField("logger", "klog").Log(level, string(line))
}

// stdlogWriter logs each line the standard library's logger writes (an http.Server's
// ErrorLog) as a warning.
type stdlogWriter struct{ log *logrus.Logger }

func (w stdlogWriter) Write(p []byte) (int, error) {
	w.log.WithField("logger", "stdlib").Warn(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// logrusSink is a logr.LogSink writing to a logrus.Logger: klog's structured calls (InfoS,
// ErrorS, V(n).InfoS) become entries with their key/value pairs as fields.
type logrusSink struct {
	log    *logrus.Logger
	name   string
	fields logrus.Fields
}

func (s *logrusSink) Init(logr.RuntimeInfo) {}

// logrusLevel is klog's verbosity as a logrus level: V(0) is info, higher verbosities are debug.
func logrusLevel(v int) logrus.Level {
	if v <= 0 {
		return logrus.InfoLevel
	}
	return logrus.DebugLevel
}

func (s *logrusSink) Enabled(level int) bool { return s.log.IsLevelEnabled(logrusLevel(level)) }

func (s *logrusSink) Info(level int, msg string, kv ...any) { s.entry(kv).Log(logrusLevel(level), msg) }

func (s *logrusSink) Error(err error, msg string, kv ...any) {
	e := s.entry(kv)
	if lostLeaseRace(err, msg) {
		e.WithFields(logrus.Fields{"action": "stand by", "reason": "another replica created the Lease first"}).
			Info("Another replica created the Lease first: this one stands by and campaigns for it at every retry period.")
		return
	}
	if err != nil {
		e = e.WithError(err)
	}
	e.Error(msg)
}

// leaseCreateMessage is what client-go's leader election (tools/leaderelection,
// tryAcquireOrRenew) logs at error level when its create of the Lease fails.
const leaseCreateMessage = "Error initially creating lease lock"

// lostLeaseRace tells client-go's leader-election error that is no error: replicas started
// together each find no Lease, each create it, and all but one are told it already exists.
// That is the election working, and client-go logs it at error level on every rollout, from
// inside its campaign loop, with no option to say otherwise. So exactly that message with an
// AlreadyExists error is logged as what it is (info); the same message with any other error
// (forbidden, a timeout), and every other Lease error, stays an error.
func lostLeaseRace(err error, msg string) bool {
	return msg == leaseCreateMessage && apierrors.IsAlreadyExists(err)
}

func (s *logrusSink) WithValues(kv ...any) logr.LogSink {
	return &logrusSink{log: s.log, name: s.name, fields: addPairs(s.fields, kv)}
}

func (s *logrusSink) WithName(name string) logr.LogSink {
	return &logrusSink{log: s.log, name: s.name + "/" + name, fields: s.fields}
}

func (s *logrusSink) entry(kv []any) *logrus.Entry {
	fields := addPairs(s.fields, kv)
	fields["logger"] = s.name
	return s.log.WithFields(fields)
}

// addPairs is fields plus klog's key/value pairs as fields, in a new map. Values are written
// as klog writes them: a logr.Marshaler by what it marshals to, an error or a Stringer (a
// duration, an object reference) as its text, unless it is JSON of its own.
func addPairs(fields logrus.Fields, kv []any) logrus.Fields {
	out := make(logrus.Fields, len(fields)+len(kv)/2+1)
	maps.Copy(out, fields)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if i+1 == len(kv) {
			out[key] = "(MISSING)"
			break
		}
		out[key] = logValue(kv[i+1])
	}
	return out
}

func logValue(v any) any {
	if m, ok := v.(logr.Marshaler); ok {
		v = m.MarshalLog()
	}
	switch x := v.(type) {
	case error:
		return x.Error()
	case json.Marshaler:
		return x
	case fmt.Stringer:
		return x.String()
	}
	return v
}
