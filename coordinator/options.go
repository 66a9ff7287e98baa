package coordinator

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/depwatch/depwatch/coordinator/egress"
	"github.com/depwatch/depwatch/coordinator/rights"
	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/coordinator/weeder"
)

// Options are the coordinator's command-line settings. Every flag can also be set by an
// environment variable: DEPWATCH_ + the flag name in upper snake case
// (--kube-api-qps → DEPWATCH_KUBE_API_QPS); a flag on the command line wins over the
// variable. --kubeconfig is the exception: its variable is the usual KUBECONFIG.
type Options struct {
	ConfigFile              string
	ProberConfigFile        string
	ConfigReloadInterval    time.Duration
	KubeAPIQPS              float64
	KubeAPIBurst            int
	EventsQPS               float64
	EventsBurst             int
	Batching                weeder.Batching
	ConcurrentReconciles    int
	MetricsBindAddr         string
	HealthBindAddr          string
	EnableLeaderElection    bool
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	UseEndpoints            bool
	Kubeconfig              string
	// CheckConfig: check the flags and config files, say what would run, and exit.
	CheckConfig bool
	// Executor is --executor: the runs as Jobs, in-process, or decided by the Job rights.
	Executor rights.ExecutorChoice
	// JobEgressPolicy: keep the NetworkPolicy that lets the Jobs reach the API server
	// (coordinator/egress); only with Jobs.
	JobEgressPolicy bool

	// Role is which half of the work this process does: both (`depwatch coordinator`), or
	// dependency-watchdog's weeder or prober command (ParseDWDFlags).
	Role roles.Role
}

// Lease is the name of the Lease the leader election uses: LeaseName, or
// dependency-watchdog's own under its commands.
func (o Options) Lease() string { return cmp.Or(dwdLeases[o.Role], LeaseName) }

// LeaseNamespace is where the Lease lives: --leader-election-namespace, else roles.HomeNamespace.
func (o Options) LeaseNamespace(lookup func(string) (string, bool)) string {
	return cmp.Or(o.LeaderElectionNamespace, roles.HomeNamespace(o.Role, lookup))
}

// Defaults of the seed (dependency-watchdog).
const (
	// DefaultQPS and DefaultBurst fit a seed's storm (hundreds of services going down at
	// once, each an API call or three): what Gardener gives dependency-watchdog's prober.
	DefaultQPS   = 20
	DefaultBurst = 100
	LeaseName    = "depwatch-coordinator"
	// Events have their own rate limit, so a storm's Events (one per service) never delay a
	// Job's creation, and a storm's Events are written within seconds.
	DefaultEventsQPS   = 100
	DefaultEventsBurst = 500
)

// EnvName is the environment variable that sets a flag: DEPWATCH_ + its name in upper snake case.
func EnvName(flagName string) string {
	if flagName == "kubeconfig" {
		return "KUBECONFIG"
	}
	return "DEPWATCH_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// checkConfigFlag has no environment variable: one left in a Deployment would turn every
// start into a check that exits.
const checkConfigFlag = "check-config"

// ErrHelp is returned by ParseFlags after printing the help.
var ErrHelp = flag.ErrHelp

func newFlagSet(o *Options) *flag.FlagSet {
	fs := flag.NewFlagSet("depwatch coordinator", flag.ContinueOnError)
	bindFlags(fs, o, roles.Coordinator)
	return fs
}

// flagSpec is one flag of the coordinator's and dependency-watchdog's command lines: its
// name, the Options field it sets with its default, its help, and what makes a value
// invalid. Registration, --help and validation all come from the one table (flagSpecs).
type flagSpec struct {
	name string
	bind func(fs *flag.FlagSet, name, usage string)
	// usage is the help text, worded for the command line it is in.
	usage string
	// invalid says what is wrong with the value ("value: why"), "" when it is valid; nil:
	// any value the flag parses is valid.
	invalid func() string
	// coordinatorOnly: `depwatch coordinator`'s flag; dependency-watchdog's commands have
	// none and keep the field's default.
	coordinatorOnly bool
}

const (
	shared          = false
	coordinatorOnly = true
)

// flagSpecs are the flags, bound to o's fields, in the order their problems are reported,
// each worded and defaulted for role.
func flagSpecs(o *Options, role roles.Role) []flagSpec {
	qps, burst := defaultLimits(role)
	// t: the words that differ between the two command lines.
	t := struct{ config, workers, elect, home, alias string }{
		"the config file (required): dependency-watchdog's weeder config, optionally with depwatch's sections",
		"workers of each controller: services (weeder) and namespaces or shards (prober)",
		"elect one active coordinator through a Lease named " + LeaseName, "the coordinator's own namespace, else " + roles.DefaultNamespace, ""}
	if role != roles.Coordinator {
		t.config = map[roles.Role]string{roles.Weeder: "dependency-watchdog's weeder config (its ConfigMap data as it is: watchDuration, servicesAndDependantSelectors; depwatch's weeder fields are accepted too)",
			roles.Prober: "dependency-watchdog's prober config (its ConfigMap data as it is: kubeConfigSecretName, probeInterval, dependentResourceInfos, ...)"}[role] + " (required)"
		t.workers = "workers: services (weeder) or namespaces and shards (prober)"
		t.elect, t.home = "elect one active replica through the Lease "+dwdLeases[role], "the pod's own namespace, else "+roles.DWDLeaseNamespace
		t.alias = "; --%s-bind-address, as dependency-watchdog's help spells it, is the same flag"
	}
	bindAddrUsage := func(name, usage string) string {
		if t.alias != "" {
			usage += fmt.Sprintf(t.alias, name)
		}
		return usage
	}
	b := &o.Batching
	return []flagSpec{
		// --config-file's one problem, required, is said without a value (validate).
		{"config-file", flagOn(&o.ConfigFile, ""), "path of " + t.config, nil, shared},
		{"prober-config-file", flagOn(&o.ProberConfigFile, ""), "path of dependency-watchdog's prober config (its ConfigMap data as it is, top level): becomes the config's prober section; the config file must then have none", nil, coordinatorOnly},
		{"config-reload-interval", flagOn(&o.ConfigReloadInterval, DefaultConfigReloadInterval), "how often the config file is checked: a valid change stops the coordinator (exit 0) so that its Deployment restarts it with the file; an invalid one is reported and the running config kept (0: never)", atLeast(&o.ConfigReloadInterval, 0, "must not be negative (0: never check)"), coordinatorOnly},
		{"kube-api-qps", flagOn(&o.KubeAPIQPS, qps), fmt.Sprintf("queries per second to the API server: the process's one budget, the controller and every in-process run together (0 means %g)", qps), atLeast(&o.KubeAPIQPS, 0, "must not be negative"), shared},
		{"kube-api-burst", flagOn(&o.KubeAPIBurst, burst), fmt.Sprintf("burst of queries to the API server, in the same budget (0 means %d)", burst), atLeast(&o.KubeAPIBurst, 0, "must not be negative"), shared},
		{"kube-api-events-qps", flagOn(&o.EventsQPS, DefaultEventsQPS), "queries per second for Events (WeederArmed, ...), a rate limit of their own so a storm's Events never delay a weeder Job (0 means 100)", atLeast(&o.EventsQPS, 0, "must not be negative"), coordinatorOnly},
		{"kube-api-events-burst", flagOn(&o.EventsBurst, DefaultEventsBurst), "burst of Events to the API server (0 means 500)", atLeast(&o.EventsBurst, 0, "must not be negative"), coordinatorOnly},
		{"weeder-batch-after", flagOn(&b.After, weeder.DefaultBatchAfter), "weeder Jobs of their own launched within --weeder-batch-window; beyond that, services that need a weeder are covered together by batch Jobs (each service still followed on its own); 0: always batch", atLeast(&b.After, 0, "must not be negative"), coordinatorOnly},
		{"weeder-batch-window", flagOn(&b.Window, weeder.DefaultBatchWindow), "the window --weeder-batch-after counts launches in", atLeast(&b.Window, 1, "must be positive"), coordinatorOnly},
		{"weeder-batch-size", flagOn(&b.Size, weeder.DefaultBatchSize), "services one batch weeder Job covers, at most", within(&b.Size, 1, weeder.MaxBatchSize, fmt.Sprintf("must be 1 to %d (a Job's env and annotations grow with it)", weeder.MaxBatchSize)), coordinatorOnly},
		{"weeder-batch-linger", flagOn(&b.Linger, weeder.DefaultBatchLinger), "a forming batch waits for others until none has joined for this long (at most 5 times this after its first service) before its batch Job is launched", within(&b.Linger, 0, time.Minute, "must be 0s to 1m (services wait for their weeder this long)"), coordinatorOnly},
		// The least positive float64: any rate above 0.
		{"weeder-batch-max-qps", flagOn(&b.MaxQPS, weeder.DefaultBatchMaxQPS), fmt.Sprintf("cap of a batch weeder Job's API rate limit (its KUBE_API_QPS and KUBE_API_EVENTS_QPS), which grows by %d requests a second per service it covers (%d for Events), never below a lone weeder's 5", weeder.QPSPerService, weeder.EventsQPSPerService), within(&b.MaxQPS, math.SmallestNonzeroFloat64, 100000, "must be greater than 0 and at most 100000 (requests a second)"), coordinatorOnly},
		{"weeder-batch-max-burst", flagOn(&b.MaxBurst, weeder.DefaultBatchMaxBurst), fmt.Sprintf("cap of a batch weeder Job's API burst (KUBE_API_BURST, KUBE_API_EVENTS_BURST), which grows by %d per service (%d for Events), never below a lone weeder's 10", weeder.BurstPerService, weeder.EventsBurstPerService), within(&b.MaxBurst, 1, 100000, "must be 1 to 100000"), coordinatorOnly},
		{"max-weeder-jobs", flagOn(&b.MaxJobs, weeder.DefaultMaxWeeders), "weeder Jobs (pods) active at once, at most; services past it wait, armed or unarmed, until one finishes (0: no cap)", atLeast(&b.MaxJobs, 0, "must not be negative (0: no cap)"), coordinatorOnly},
		{"concurrent-reconciles", flagOn(&o.ConcurrentReconciles, 1), t.workers + " handled at the same time (at least 1)", atLeast(&o.ConcurrentReconciles, 1, "must be at least 1"), shared},
		{"metrics-bind-addr", flagOn(&o.MetricsBindAddr, ":9643"), bindAddrUsage("metrics", "address of the Prometheus /metrics endpoint (0 disables it)"), bindAddr(&o.MetricsBindAddr), shared},
		{"health-bind-addr", flagOn(&o.HealthBindAddr, ":9644"), bindAddrUsage("health", "address of /healthz and /readyz (0 disables them)"), bindAddr(&o.HealthBindAddr), shared},
		{"enable-leader-election", flagOn(&o.EnableLeaderElection, false), t.elect, nil, shared},
		{"leader-election-namespace", flagOn(&o.LeaderElectionNamespace, ""), "namespace of the Lease (default: " + t.home + ")", nil, shared},
		// client-go's and dependency-watchdog's timings; their relations are checked after
		// every flag's own (validate).
		{"leader-elect-lease-duration", flagOn(&o.LeaseDuration, 15*time.Second), "how long a standby waits before taking over a lease that was not renewed", atLeast(&o.LeaseDuration, 1, "must be positive"), shared},
		{"leader-elect-renew-deadline", flagOn(&o.RenewDeadline, 10*time.Second), "how long the leader keeps trying to renew before it gives up leadership", atLeast(&o.RenewDeadline, 1, "must be positive"), shared},
		{"leader-elect-retry-period", flagOn(&o.RetryPeriod, 2*time.Second), "interval between attempts to acquire or renew the lease", atLeast(&o.RetryPeriod, 1, "must be positive"), shared},
		{"kubeconfig", flagOn(&o.Kubeconfig, ""), "path of a kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)", nil, shared},
		{"use-endpoints", flagOn(&o.UseEndpoints, false), "watch legacy v1 Endpoints instead of discovery.k8s.io/v1 EndpointSlices (also config useEndpoints)", nil, coordinatorOnly},
		{checkConfigFlag, flagOn(&o.CheckConfig, false), "check the flags, the environment and the config files as a start would, print every problem (one a line, exit 2) or \"config is valid\" and what would be watched and launched (exit 0), and exit; contacts no cluster and needs no kubeconfig", nil, coordinatorOnly},
		{"job-egress-policy", flagOn(&o.JobEgressPolicy, false), "keep the NetworkPolicy " + egress.PolicyName + " in the Jobs' namespace: the weeder and probe Jobs may connect to the API server's addresses (the kubernetes Service's and its endpoints', followed as they change) and to no other address on those ports; set by depwatch's own install, whose policies allow the Jobs nothing else on them (with Jobs only; needs networkpolicies get, create and patch there)", nil, coordinatorOnly},
		{"executor", func(fs *flag.FlagSet, name, usage string) {
			fs.TextVar(&o.Executor, name, rights.ExecutorChoiceJob, usage)
		}, "what carries the weeder and probe runs out: job (a Job each, under its own service account), in-process (the same engines in this process, for clusters that grant no Jobs; the process then needs the runs' rights) or auto (Jobs where a SelfSubjectAccessReview at start shows this service account may create them, else in-process); said in the first log lines and in depwatch_coordinator_executor", nil, coordinatorOnly},
	}
}

// bindFlags binds role's flags (flagSpecs) into o; under dependency-watchdog's commands the
// coordinator's own flags only set their fields' defaults.
func bindFlags(fs *flag.FlagSet, o *Options, role roles.Role) {
	defaults := flag.NewFlagSet("defaults", flag.ContinueOnError)
	for _, s := range flagSpecs(o, role) {
		if role != roles.Coordinator && s.coordinatorOnly {
			s.bind(defaults, s.name, s.usage)
		} else {
			s.bind(fs, s.name, s.usage)
		}
	}
}

// flagOn binds a flag to p, set to def, as the flag package's own kind of p (which --help names).
func flagOn[T bool | int | float64 | string | time.Duration](p *T, def T) func(fs *flag.FlagSet, name, usage string) {
	return func(fs *flag.FlagSet, name, usage string) {
		switch p := any(p).(type) {
		case *bool:
			fs.BoolVar(p, name, any(def).(bool), usage)
		case *int:
			fs.IntVar(p, name, any(def).(int), usage)
		case *float64:
			fs.Float64Var(p, name, any(def).(float64), usage)
		case *string:
			fs.StringVar(p, name, any(def).(string), usage)
		case *time.Duration:
			fs.DurationVar(p, name, any(def).(time.Duration), usage)
		}
	}
}

// atLeast: a value below least is invalid, for why.
func atLeast[T int | float64 | time.Duration](p *T, least T, why string) func() string {
	return func() string {
		if *p < least {
			return fmt.Sprint(*p) + ": " + why
		}
		return ""
	}
}

// within: a value outside lo to hi, NaN included, is invalid, for why.
func within[T int | float64 | time.Duration](p *T, lo, hi T, why string) func() string {
	return func() string {
		if !(lo <= *p && *p <= hi) {
			return fmt.Sprint(*p) + ": " + why
		}
		return ""
	}
}

// bindAddr: an address to listen on, or 0 (disabled).
func bindAddr(addr *string) func() string {
	return func() string {
		if *addr == "0" {
			return ""
		}
		if _, port, err := net.SplitHostPort(*addr); err != nil {
			return strconv.Quote(*addr) + ": must be host:port, :port or 0 (disabled)"
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return strconv.Quote(*addr) + ": port must be a number 0-65535"
		}
		return ""
	}
}

// defaultLimits are --kube-api-qps and --kube-api-burst's defaults, which 0 also means.
func defaultLimits(role roles.Role) (float64, int) {
	if role == roles.Coordinator {
		return DefaultQPS, DefaultBurst
	}
	return dwdKubeAPIQPS, dwdKubeAPIBurst
}

// ParseFlags reads the environment, then the command line, then validates. All problems
// are reported at once, each naming the flag (or variable) and the value. On --help it
// writes the usage to help and returns ErrHelp.
func ParseFlags(args []string, lookup func(string) (string, bool), help io.Writer) (Options, error) {
	var o Options
	err := parse(newFlagSet(&o), &o, args, lookup, func() { Usage(help) })
	return o, err
}

// parse reads the variables of fs's flags (envOf), then args, then validates o, and settles
// what 0 means for the API limits: either command line's one reading.
func parse(fs *flag.FlagSet, o *Options, args []string, lookup func(string) (string, bool), usage func()) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "kubeconfig" || f.Name == checkConfigFlag || dwdAliases[f.Name] != "" {
			return // the API client reads KUBECONFIG itself; --check-config is the command line's; an alias has its flag's variable
		}
		env := EnvName(f.Name)
		if v, ok := lookup(env); ok && v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q (--%s): %s", env, v, f.Name, parseProblem(err.Error())))
			}
		}
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return ErrHelp
		}
		return errors.New(strings.Join(append(errs, flagProblem(err)), "\n"))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Sprintf("unexpected argument %q (flags only; see --help)", fs.Arg(0)))
	}
	if errs = append(errs, o.validate()...); len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	qps, burst := defaultLimits(o.Role)
	o.KubeAPIQPS, o.KubeAPIBurst = cmp.Or(o.KubeAPIQPS, qps), cmp.Or(o.KubeAPIBurst, burst)
	o.EventsQPS, o.EventsBurst = cmp.Or(o.EventsQPS, DefaultEventsQPS), cmp.Or(o.EventsBurst, DefaultEventsBurst)
	return nil
}

// printFlags writes fs's flags for --help: each with its type, usage, default and variable
// (none for a flag that has none: an alias, one without effect).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, _ := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s %s\n      %s\n", f.Name, typ, f.Usage)
		env := "env " + EnvName(f.Name)
		switch {
		case f.Name == checkConfigFlag:
			env = "no env (command line only)"
		case dwdAliases[f.Name] != "" || dwdNoEffectFlags[f.Name].why != "":
			return
		}
		fmt.Fprintf(w, "      default %s, %s\n", cmp.Or(f.DefValue, `""`), env)
	})
}

// validate checks every flag of o's command line (flagSpecs) and names each invalid one with
// its value.
func (o *Options) validate() []string {
	var errs []string
	if o.ConfigFile == "" {
		errs = append(errs, "--config-file: required (or "+EnvName("config-file")+")")
	}
	for _, s := range flagSpecs(o, o.Role) {
		if s.invalid == nil {
			continue
		}
		if problem := s.invalid(); problem != "" {
			errs = append(errs, "--"+s.name+"="+problem)
		}
	}
	// The Lease timings' relations, as client-go's leader election requires them.
	if o.LeaseDuration > 0 && o.RenewDeadline > 0 && o.RenewDeadline >= o.LeaseDuration {
		errs = append(errs, "--leader-elect-renew-deadline="+o.RenewDeadline.String()+": must be shorter than --leader-elect-lease-duration="+o.LeaseDuration.String())
	}
	if o.RenewDeadline > 0 && o.RetryPeriod > 0 && float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) {
		errs = append(errs, "--leader-elect-retry-period="+o.RetryPeriod.String()+": must be shorter than --leader-elect-renew-deadline="+o.RenewDeadline.String()+" / 1.2")
	}
	return errs
}

// parseProblem shortens the flag package's value errors.
func parseProblem(msg string) string {
	switch {
	case strings.Contains(msg, "parse error"):
		return "cannot be parsed"
	case strings.Contains(msg, "out of range"):
		return "out of range"
	}
	return msg
}

// flagErrors are the flag package's parse errors that flagProblem rewrites, with what it adds.
var flagErrors = []struct {
	re   *regexp.Regexp
	hint string
}{
	{regexp.MustCompile(`(?s)^invalid value (.*?) for flag -(.*?): (.*)$`), ""},                        // invalid value "x" for flag -kube-api-qps: parse error
	{regexp.MustCompile(`(?s)^invalid boolean value (.*?) for -(.*?): (.*)$`), " (use true or false)"}, // invalid boolean value "yes" for -enable-leader-election: parse error
}

// flagProblem rewrites the flag package's parse errors so they name --flag and the value.
func flagProblem(err error) string {
	msg := err.Error()
	for _, e := range flagErrors {
		if m := e.re.FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("--%s=%s: %s%s", m[2], m[1], parseProblem(m[3]), e.hint)
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name + " (see --help)"
	}
	return msg
}

// Usage writes the coordinator's help: every flag, its default and its variable.
func Usage(w io.Writer) {
	var o Options
	fs := newFlagSet(&o)
	fmt.Fprint(w, `Usage: depwatch coordinator --config-file PATH [flags]
       depwatch coordinator --check-config --config-file PATH [flags]

Always-on coordinator. It never deletes a pod or scales anything itself: it launches Jobs.

Weeder (servicesAndDependantSelectors): watches the EndpointSlices (or Endpoints) of the
configured services. When a service loses its last ready endpoint it launches the service's
weeder Job armed (`+"`depwatch reap`"+` with START_WHEN_READY), which restarts the crash-looping
dependents the moment the service is Ready again, for watchDuration; a return without an
armed weeder launches one at once. On start and on winning leadership every Ready service
with a crash-looping dependent gets a weeder (catch-up). When many services need a weeder at
once, batch Jobs cover them together (--weeder-batch-*, --max-weeder-jobs).

Prober (the prober section or --prober-config-file): keeps every selected control-plane
namespace probed by a probe Job per shard of namespaces (`+"`depwatch probe`"+`), which scales
kube-controller-manager and friends down when the shoot's node leases expire en masse, and
back up when they recover.

Exit codes: 0 stopped by SIGTERM/SIGINT, 1 runtime failure (e.g. lost leadership), 2 invalid
flags or config. With --check-config: 0 valid, 2 invalid.

Flags (each also set by the environment variable shown; the flag wins):
`)
	printFlags(w, fs)
}
