package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/depwatch/depwatch/coordinator"
)

// checkRequested says whether the coordinator's command line asks for --check-config. It is
// read before the flags are parsed, so that a check whose flags do not parse still answers
// as a check: every problem on a line of its own.
func checkRequested(args []string) bool {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "check-config" {
			continue
		}
		if !hasValue {
			return true
		}
		on, err := strconv.ParseBool(value)
		return err == nil && on
	}
	return false
}

// checkConfigMain is `depwatch coordinator --check-config`: the flags, LOG_LEVEL/LOG_FORMAT
// and the config files checked as a start checks them, and nothing else done. It reads no
// kubeconfig and contacts no cluster, so it runs in CI or before an install. Every problem is
// a line of its own on stderr, naming the flag, variable or field and its value (exit 2); a
// valid config gets "config is valid", the fields that would be ignored, and a paragraph on
// what would be watched and launched (exit 0).
func checkConfigMain(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, cfg, _, err := coordinatorConfig(args, lookup, stdout)
	if errors.Is(err, coordinator.ErrHelp) {
		return exitOK
	}
	if err != nil {
		problems := coordinator.Lines(err)
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		fmt.Fprintf(stderr, "config is invalid: %d problem(s); the coordinator would refuse to start (exit 2)\n", len(problems))
		return exitBadConfig
	}
	fmt.Fprintln(stdout, "config is valid")
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "warning: "+w)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, wrap(opts.Summary(cfg), 100))
	return exitOK
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		switch {
		case i == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// isHelpFlag: --help, -h and the like, which win over --check-config.
func isHelpFlag(a string) bool { return slices.Contains([]string{"-h", "--h", "-help", "--help"}, a) }
