package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"
)

// jobSetup is what the Job subcommands (reap, probe) share: they are configured by
// environment variables, take only --kubeconfig, report every configuration problem at once
// with exit code 2, and say what was not touched when the API server cannot be reached.
type jobSetup struct {
	name      string // subcommand
	kubeHelp  string // what --kubeconfig points at
	untouched string // "no pod was touched": said when the run cannot start
	// usage writes what --help says before the flags; env, the environment's settings, after
	// them under envTitle.
	usage    func(w io.Writer)
	envTitle string
	env      func(w io.Writer)
	// lenientLogging: an unknown LOG_LEVEL or LOG_FORMAT is a warning, not a refusal
	// (reap: pod-reaper runs with them).
	lenientLogging bool
	// load reads the subcommand's options through lookup (the caller keeps them).
	load func(lookup func(string) (string, bool)) error
}

// start parses flags and environment and finds the API server. When ok is false the
// command is over and code is its exit code.
func (s jobSetup) start(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (log *logrus.Logger, cfg *rest.Config, code int, ok bool) {
	fs := flag.NewFlagSet("depwatch "+s.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", s.kubeHelp)
	fs.Usage = func() {
		s.usage(stdout)
		fmt.Fprintln(stdout, "\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprintln(stdout, "\n"+s.envTitle)
		s.env(stdout)
		printLoggingSettings(stdout)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, exitOK, false
		}
		return nil, nil, exitBadConfig, false
	}
	if fs.NArg() > 0 {
		return nil, nil, refuse(stderr, s.name, fmt.Errorf("unexpected argument %q: depwatch %s is configured by environment variables (see --help)", fs.Arg(0), s.name)), false
	}

	// Collect every problem before doing anything, so one run shows the whole list.
	var logWarnings []string
	var logErr error
	if s.lenientLogging {
		log, logWarnings, logErr = newLenientLogger(lookup)
	} else {
		log, logErr = newLogger(lookup)
	}
	var flagErr error
	if *kubeconfig != "" && inPod(lookup) {
		flagErr = errKubeconfigInPod
	}
	if err := errors.Join(flagErr, logErr, s.load(lookup)); err != nil {
		return nil, nil, refuse(stderr, s.name, err), false
	}
	log.SetOutput(stdout)
	for _, w := range logWarnings {
		log.WithField("setting", w).Warnf("Accepted an odd setting: %s", w)
	}

	cfg, ignored, err := jobRestConfig(*kubeconfig, lookup)
	if err != nil {
		return nil, nil, s.cannotStart(log, "Cannot reach the Kubernetes API server", err), false
	}
	for _, name := range ignored {
		log.WithFields(logrus.Fields{"setting": name, "action": "ignored", "reason": "in a pod"}).
			Warnf("%s is set, and ignored: inside a pod depwatch %s talks only to the cluster it runs in, with its service account.", name, s.name)
	}
	return log, cfg, exitOK, true
}

// cannotStart logs why the run could not start, leaves it as the termination message and
// returns exit code 1.
func (s jobSetup) cannotStart(log logrus.FieldLogger, what string, err error) int {
	log.WithError(err).Errorf("%s; %s.", what, s.untouched)
	writeTerminationMessage(err.Error())
	return exitFailure
}
