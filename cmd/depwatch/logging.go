package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sirupsen/logrus"
)

// Log formats, named as pod-reaper names them so its Deployments keep their settings.
const (
	logFormatLogrus  = "Logrus"  // JSON: level, msg, time
	logFormatFluentd = "Fluentd" // JSON: severity, message, time
	logFormatText    = "Text"    // key=value lines for people at a terminal
)

// loggingSettings documents LOG_LEVEL and LOG_FORMAT for every subcommand's --help.
var loggingSettings = [][3]string{
	{"LOG_LEVEL", "info", "panic, fatal, error, warning, info, debug or trace"},
	{"LOG_FORMAT", logFormatLogrus, "Logrus (JSON: level, msg, time), Fluentd (JSON: severity, message, time) or Text"},
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
// values are errors naming the variable, so they are reported with the rest of the config.
func newLogger(lookup func(string) (string, bool)) (*logrus.Logger, error) {
	log := logrus.New()
	log.SetOutput(os.Stdout)
	var problems []string

	if raw, ok := lookup("LOG_LEVEL"); ok && strings.TrimSpace(raw) != "" {
		level, err := logrus.ParseLevel(strings.TrimSpace(raw))
		if err != nil {
			problems = append(problems, fmt.Sprintf("LOG_LEVEL=%q: must be one of panic, fatal, error, warning, info, debug, trace", raw))
		} else {
			log.SetLevel(level)
		}
	}

	format := logFormatLogrus
	if raw, ok := lookup("LOG_FORMAT"); ok && strings.TrimSpace(raw) != "" {
		format = strings.TrimSpace(raw)
	}
	switch {
	case strings.EqualFold(format, logFormatLogrus):
		log.SetFormatter(&logrus.JSONFormatter{})
	case strings.EqualFold(format, logFormatFluentd):
		log.SetFormatter(&logrus.JSONFormatter{FieldMap: logrus.FieldMap{
			logrus.FieldKeyLevel: "severity",
			logrus.FieldKeyMsg:   "message",
		}})
	case strings.EqualFold(format, logFormatText):
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	default:
		problems = append(problems, fmt.Sprintf("LOG_FORMAT=%q: must be Logrus, Fluentd or Text", format))
	}

	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return log, nil
}
