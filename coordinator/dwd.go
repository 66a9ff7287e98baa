package coordinator

// dependency-watchdog's command line, as gardenlet starts it:
//
//	/usr/local/bin/dependency-watchdog weeder --config-file=/etc/dependency-watchdog/config/dep-config.yaml --enable-leader-election=true
//	/usr/local/bin/dependency-watchdog prober --config-file=... --kube-api-qps=20.0 --kube-api-burst=100 --zap-log-level=INFO --enable-leader-election=true
//
// (gardener v1.149.3, pkg/component/nodemanagement/dependencywatchdog/bootstrap.go). Each
// command is one half of the coordinator's work with dependency-watchdog's flags (v1.7.0,
// cmd/command.go, plus the --kubeconfig and --zap-* flags its binary registers), its Lease
// names and its config file, read as it is. A flag depwatch gives no meaning is accepted,
// with dependency-watchdog's own checks of its value, and named in one start-up warning.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/coordinator/rights"
	"github.com/depwatch/depwatch/coordinator/roles"
)

// dependency-watchdog's defaults where they differ from the coordinator's.
const (
	dwdKubeAPIQPS   = 5  // client-go's default, which dependency-watchdog keeps
	dwdKubeAPIBurst = 10 // client-go's default
)

// DWDSettings is what a dependency-watchdog command line says besides Options.
type DWDSettings struct {
	// LogLevel is --zap-log-level as a logrus level; nil: not given.
	LogLevel *logrus.Level
	// NoEffect names the flags given that depwatch accepts but does not use, each with why,
	// for the one start-up warning.
	NoEffect []string
}

// noEffectFlag is a dependency-watchdog flag depwatch accepts without using it: its value is
// checked as dependency-watchdog checks it, so what dependency-watchdog refuses depwatch
// refuses too.
type noEffectFlag struct {
	usage, why string
	check      func(string) error // nil: any value
	boolean    bool               // a boolean flag: any value strconv.ParseBool reads
}

var dwdNoEffectFlags = map[string]noEffectFlag{
	"pprof-bind-addr":      {usage: "dependency-watchdog's profiling endpoint", why: "depwatch serves no profiling endpoint"},
	"zap-devel":            {usage: "zap's development mode", why: "depwatch logs as LOG_FORMAT says (Logrus JSON by default)", boolean: true},
	"zap-encoder":          {usage: "zap's encoding: json or console", why: "depwatch logs as LOG_FORMAT says (Logrus JSON by default)", check: oneOf("json", "console")},
	"zap-stacktrace-level": {usage: "the level from which zap adds stack traces: info, error or panic", why: "depwatch writes no stack traces into its log", check: oneOf("info", "error", "panic")},
	"zap-time-encoding":    {usage: "zap's time encoding: epoch, millis, nanos, iso8601, rfc3339 or rfc3339nano", why: "depwatch writes RFC 3339 times", check: oneOf("epoch", "millis", "nanos", "iso8601", "rfc3339", "rfc3339nano")},
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if slices.Contains(values, strings.ToLower(v)) {
			return nil
		}
		return fmt.Errorf("must be one of %s", strings.Join(values, ", "))
	}
}

// zapLevels are --zap-log-level's names (any case); an integer > 0 is zap's verbosity, which
// depwatch logs as debug.
var zapLevels = map[string]logrus.Level{"debug": logrus.DebugLevel, "info": logrus.InfoLevel, "error": logrus.ErrorLevel, "panic": logrus.PanicLevel}

func zapLevel(v string) (logrus.Level, error) {
	if l, ok := zapLevels[strings.ToLower(v)]; ok {
		return l, nil
	}
	if n, err := strconv.Atoi(v); err != nil || n <= 0 {
		return 0, errors.New("must be debug, info, error, panic or an integer > 0 (zap's verbosity)")
	}
	return logrus.DebugLevel, nil
}

// newDWDFlagSet binds dependency-watchdog's flags: those depwatch uses into o, the rest
// (--zap-log-level among them) checked as dependency-watchdog checks them, their values
// given into the returned map.
func newDWDFlagSet(role roles.Role, o *Options) (*flag.FlagSet, map[string]string) {
	fs := flag.NewFlagSet("dependency-watchdog "+string(role), flag.ContinueOnError)
	bindFlags(fs, o, role)
	given := map[string]string{}
	checked := func(name string, check func(string) error) func(string) error {
		return func(v string) error {
			if check != nil {
				if err := check(v); err != nil {
					return err
				}
			}
			given[name] = v
			return nil
		}
	}
	fs.Func("zap-log-level", "log level: debug, info, error, panic, or an integer > 0 (zap's verbosity: debug); overrides LOG_LEVEL",
		checked("zap-log-level", func(v string) error { _, err := zapLevel(v); return err }))
	for name, f := range dwdNoEffectFlags {
		usage := f.usage + " (accepted; no effect: " + f.why + ")"
		if f.boolean {
			fs.BoolFunc(name, usage, checked(name, parseBool))
		} else {
			fs.Func(name, usage, checked(name, f.check))
		}
	}
	// The spellings of dependency-watchdog's help text, one flag with the real ones.
	for alias, name := range dwdAliases {
		f := fs.Lookup(name)
		fs.Var(f.Value, alias, "same as --"+name)
	}
	return fs, given
}

// parseBool checks a boolean flag's value as the flag package's own boolean flags do.
func parseBool(v string) error {
	if _, err := strconv.ParseBool(v); err != nil {
		return errors.New("parse error")
	}
	return nil
}

// dwdAliases are the flag names dependency-watchdog's help text gives (its binary knows only
// the -addr ones): depwatch takes both.
var dwdAliases = map[string]string{"metrics-bind-address": "metrics-bind-addr", "health-bind-address": "health-bind-addr"}

// dwdLeases are the Leases dependency-watchdog's commands elect through.
var dwdLeases = map[roles.Role]string{roles.Weeder: roles.WeederLeaseName, roles.Prober: roles.ProberLeaseName}

// ParseDWDFlags reads dependency-watchdog's command line for role (roles.Weeder or roles.Prober):
// the variables of the flags depwatch uses (DEPWATCH_ + the flag name, as for the
// coordinator), then the command line, then validates. Every problem is reported at once,
// each naming the flag and the value; a flag neither dependency-watchdog nor depwatch knows
// is refused, as dependency-watchdog refuses it. On --help it writes the usage to help and
// returns ErrHelp.
func ParseDWDFlags(role roles.Role, args []string, lookup func(string) (string, bool), help io.Writer) (Options, DWDSettings, error) {
	o := Options{Role: role}
	var s DWDSettings
	if role != roles.Weeder && role != roles.Prober {
		return o, s, fmt.Errorf("dependency-watchdog has no command %q (weeder or prober)", role)
	}
	fs, given := newDWDFlagSet(role, &o)
	o.Executor = rights.ExecutorChoiceAuto
	err := parse(fs, &o, args, lookup, func() { DWDUsage(role, help) })
	if l, err := zapLevel(given["zap-log-level"]); given["zap-log-level"] != "" && err == nil {
		s.LogLevel = &l
	}
	fs.Visit(func(f *flag.Flag) {
		if n, ok := dwdNoEffectFlags[f.Name]; ok {
			s.NoEffect = append(s.NoEffect, fmt.Sprintf("--%s=%s (%s)", f.Name, given[f.Name], n.why))
		}
	})
	return o, s, err
}

// DWDUsage writes the help of dependency-watchdog's command role: every flag, its default,
// its variable, and what depwatch does with it.
func DWDUsage(role roles.Role, w io.Writer) {
	var o Options
	fs, _ := newDWDFlagSet(role, &o)
	// What the command does, as its ConfigMap says it.
	does := map[roles.Role]string{roles.Weeder: `dependency-watchdog's weeder, as gardenlet starts it: the coordinator's weeder alone, on
dependency-watchdog's weeder ConfigMap as it is. When a configured service loses its last
ready endpoint its weeder is armed; when the service is Ready again the weeder restarts the
dependents stuck in CrashLoopBackOff, for watchDuration.
`, roles.Prober: `dependency-watchdog's prober, as gardenlet starts it: the coordinator's prober alone, on
dependency-watchdog's prober ConfigMap as it is. Every control-plane namespace (Gardener's
Cluster resources, namespaces labelled gardener.cloud/role=shoot) is probed; when too many
of a shoot's node leases expired, kube-controller-manager and the other dependents are
scaled down level by level, and back up when the leases recover.
`}[role]
	fmt.Fprintf(w, `Usage: dependency-watchdog %[1]s --config-file PATH [flags]
       (also: depwatch %[1]s ...; the image has /usr/local/bin/dependency-watchdog)

%[2]s
Where it runs: where the cluster grants depwatch's own Job rights (a SelfSubjectAccessReview
at start says), each weeder or probe run is a Job; else, as under gardenlet's RBAC, which
grants no Jobs, the same runs execute in this process, each run's log lines carrying the Job
name it would have had. The first log lines and depwatch_coordinator_executor{kind} say which.

Exit codes: 0 stopped by SIGTERM/SIGINT, 1 runtime failure (e.g. lost leadership), 2 invalid
flags or config.

Flags (dependency-watchdog's; each depwatch uses also set by the environment variable shown, the flag winning):
`, role, does)
	printFlags(w, fs)
}
