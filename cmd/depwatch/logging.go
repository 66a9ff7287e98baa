package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// Log formats. Logrus, Fluentd and Text are named as pod-reaper names them, so its
// Deployments keep their settings and their lines; json is the name log pipelines expect.
const (
	logFormatJSON    = "json"    // JSON: time (RFC 3339 with nanoseconds), level, msg
	logFormatLogrus  = "Logrus"  // JSON: time (to the second, as pod-reaper writes it), level, msg
	logFormatFluentd = "Fluentd" // JSON: severity (pod-reaper's names: warn, fatal, ...), message, time
	logFormatText    = "Text"    // key=value lines for people at a terminal
)

// loggingSettings documents LOG_LEVEL and LOG_FORMAT for every subcommand's --help.
var loggingSettings = [][3]string{
	{"LOG_LEVEL", "info", "panic, fatal, error, warning, info, debug or trace"},
	{"LOG_FORMAT", logFormatLogrus, "json (JSON: time with nanoseconds, level, msg), Logrus (the same keys, time to the second, as pod-reaper), Fluentd (JSON: severity, message, time) or Text; client-go's own log lines are written in it too"},
}

// printLoggingSettings appends LOG_LEVEL and LOG_FORMAT to a command's --help, in the same
// columns as the command's own settings.
func printLoggingSettings(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Logging (every command):")
	for _, s := range loggingSettings {
		fmt.Fprintf(w, "%-26s %-10s %s\n", s[0], s[1], s[2])
	}
}

// newLogger builds the logger every subcommand uses from LOG_LEVEL and LOG_FORMAT. Unknown
// values are errors naming the variable, so they are reported with the rest of the config;
// lenient is for `depwatch reap`, which takes pod-reaper's settings as pod-reaper takes them:
// pod-reaper logs an unknown LOG_LEVEL or LOG_FORMAT as an error and carries on at info level,
// as JSON, so depwatch does the same (the returned warnings are logged once the logger works)
// instead of refusing a manifest pod-reaper ran with.
func newLogger(lookup func(string) (string, bool), lenient bool) (*logrus.Logger, []string, error) {
	log := logrus.New()
	log.SetOutput(os.Stdout)
	var problems, warnings []string

	if raw, ok := lookup("LOG_LEVEL"); ok && strings.TrimSpace(raw) != "" {
		level, err := logrus.ParseLevel(strings.TrimSpace(raw))
		switch {
		case err == nil:
			log.SetLevel(level)
		case lenient:
			warnings = append(warnings, fmt.Sprintf("LOG_LEVEL=%q: not a level (panic, fatal, error, warning, info, debug, trace); logging at info, as pod-reaper does", raw))
		default:
			problems = append(problems, fmt.Sprintf("LOG_LEVEL=%q: must be one of panic, fatal, error, warning, info, debug, trace", raw))
		}
	}

	format := logFormatLogrus
	if raw, ok := lookup("LOG_FORMAT"); ok && strings.TrimSpace(raw) != "" {
		format = strings.TrimSpace(raw)
	}
	switch {
	case strings.EqualFold(format, logFormatJSON):
		// Nanoseconds: a weeder writes many lines a second, and their order must survive
		// a pipeline that sorts by time.
		log.SetFormatter(&logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano})
	case strings.EqualFold(format, logFormatLogrus):
		log.SetFormatter(&logrus.JSONFormatter{})
	case strings.EqualFold(format, logFormatFluentd):
		log.SetFormatter(fluentdFormatter{})
	case strings.EqualFold(format, logFormatText):
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case lenient:
		log.SetFormatter(&logrus.JSONFormatter{})
		warnings = append(warnings, fmt.Sprintf("LOG_FORMAT=%q: not a format (json, Logrus, Fluentd, Text); logging as Logrus JSON, as pod-reaper does", format))
	default:
		problems = append(problems, fmt.Sprintf("LOG_FORMAT=%q: must be json, Logrus, Fluentd or Text", format))
	}

	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	routeLibraryLogs(log)
	return log, warnings, nil
}

// fluentdFormatter writes pod-reaper's LOG_FORMAT=Fluentd lines: one JSON object with the
// entry's fields plus "severity", "message" and "time" (RFC 3339 with nanoseconds). A field
// that would collide with those three keeps its value under "fields.<name>".
type fluentdFormatter struct{}

func (fluentdFormatter) Format(e *logrus.Entry) ([]byte, error) {
	data := make(map[string]any, len(e.Data)+3)
	for k, v := range e.Data {
		if err, ok := v.(error); ok {
			v = err.Error() // encoding/json would write an error as {}
		}
		switch k {
		case "severity", "message", "time":
			k = "fields." + k
		}
		data[k] = v
	}
	// Levels named as pod-reaper's Fluentd format (joonix/log) names them, which is what the
	// fluentd/Stackdriver pipelines and the dashboards built on them match.
	sev := e.Level.String()
	switch e.Level {
	case logrus.PanicLevel:
		sev = "fatal"
	case logrus.WarnLevel:
		sev = "warn"
	}
	data["severity"] = sev
	data["message"] = e.Message
	data["time"] = e.Time.Format(time.RFC3339Nano)
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("writing a Fluentd log line: %w", err)
	}
	return append(b, '\n'), nil
}
