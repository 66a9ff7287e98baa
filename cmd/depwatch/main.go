// Command depwatch keeps Kubernetes workloads healthy when something they depend on fails.
// It is one binary with subcommands; each subcommand's package does the work.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	// Zone data for SCHEDULE=CRON_TZ=...: the distroless image has none of its own.
	_ "time/tzdata"

	"github.com/depwatch/depwatch/internal/buildinfo"
	"github.com/depwatch/depwatch/reaper"
)

// Exit codes shared by every subcommand.
const (
	exitOK        = 0
	exitFailure   = 1 // the run could not do its job
	exitBadConfig = 2 // bad flags, environment or config file: nothing was acted on
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"reap", "One reaper run: kill pods that match rules (pod-reaper's environment contract). The default command.", reapMain},
		{"coordinator", "Always-on: watch services and control planes, launch weeder and probe Jobs.", coordinatorMain},
		{"probe", "One meltdown-protection probe of a control-plane namespace: scale its controllers down or up.", probeMain},
		{"weeder", "dependency-watchdog's weeder command, as gardenlet starts it: the coordinator's weeder alone.", weederMain},
		{"prober", "dependency-watchdog's prober command, as gardenlet starts it: the coordinator's prober alone.", proberMain},
		{"version", "Print the version and exit.", versionMain},
	}
}

// DWDName is dependency-watchdog's binary name: the image has /usr/local/bin/dependency-watchdog,
// the binary under that name, so gardenlet's command runs depwatch as it is.
const DWDName = "dependency-watchdog"

func main() {
	setSoftMemoryLimit()
	os.Exit(dispatchAs(os.Args[0], os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// dispatchAs runs the command args name. Invoked as dependency-watchdog (argv[0]'s base
// name), it answers as dependency-watchdog does where it has no command: its usage, exit 0.
func dispatchAs(argv0 string, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	if filepath.Base(argv0) == DWDName && len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	return dispatch(args, lookup, stdout, stderr)
}

func dispatch(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	args, implicit := defaultCommand(args, lookup)
	if len(args) == 0 {
		usage(stderr)
		fmt.Fprintf(stderr, "\ndepwatch: %s\n", noCommandNoConfig)
		writeTerminationMessage(noCommandNoConfig)
		return exitBadConfig
	}
	switch args[0] {
	case "-h", "--help", "-help":
		usage(stdout)
		return exitOK
	case "help":
		// dependency-watchdog's `help <command>`; depwatch's `help` alone.
		if len(args) > 1 {
			return dispatch([]string{args[1], "--help"}, lookup, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	case "--version", "-version":
		return versionMain(context.Background(), nil, lookup, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			// SIGTERM (a pod being stopped) and SIGINT both mean: finish what is in hand, then stop.
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			code := c.run(ctx, args[1:], lookup, stdout, stderr)
			if implicit && code == exitBadConfig {
				// Whoever typed `depwatch` may not know that it meant `depwatch reap`.
				fmt.Fprintf(stderr, "(depwatch started without a command runs reap, configured by the environment as pod-reaper's image is; 'depwatch --help' lists the commands.)\n")
			}
			return code
		}
	}
	fmt.Fprintf(stderr, "depwatch: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitBadConfig
}

// noCommandNoConfig is why depwatch started with neither a command nor reap's environment
// did nothing.
const noCommandNoConfig = "no command given and none of reap's environment variables is set, so there is nothing to run (depwatch without a command runs reap, as pod-reaper's image does)."

// defaultCommand is pod-reaper's contract at the process level: pod-reaper's Deployments start
// its image with no command and no arguments and configure it by environment alone, so
// depwatch started that way runs reap, and swapping the image is the whole migration. It runs
// reap only when the environment sets one of reap's variables: without any, reap has no rule
// and would refuse to start (as pod-reaper does), and the person who typed `depwatch` at a
// shell is better served by the list of commands. Whether stdin is a terminal plays no part: a
// pod may have one (tty: true), and the same environment must do the same thing everywhere.
// It returns the arguments to dispatch (empty: print the usage) and whether reap was implied.
func defaultCommand(args []string, lookup func(string) (string, bool)) ([]string, bool) {
	if len(args) > 0 || !reaper.Configured(lookup) {
		return args, false
	}
	return []string{"reap"}, true
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "depwatch keeps Kubernetes workloads healthy when something they depend on fails.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: depwatch [<command>] [flags]")
	fmt.Fprintln(w, "       dependency-watchdog weeder|prober [flags]   (the same binary under dependency-watchdog's name)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Without a command depwatch runs reap, configured by its environment, as pod-reaper's image")
	fmt.Fprintln(w, "does: a pod-reaper Deployment keeps working when only its image is changed to depwatch's.")
	fmt.Fprintln(w, "When none of reap's environment variables is set (see 'depwatch reap --help'), there is")
	fmt.Fprintln(w, "nothing to reap with, and depwatch prints this help and exits 2 instead, terminal or not.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Unless GOMEMLIMIT is set, the Go runtime's soft memory limit is 80% of the container's")
	fmt.Fprintln(w, "memory limit (cgroup), so that the garbage collector works harder before the kernel kills.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'depwatch <command> --help' for every setting of a command and its default.")
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func versionMain(_ context.Context, _ []string, _ func(string) (string, bool), stdout, _ io.Writer) int {
	rev := buildinfo.Revision()
	fmt.Fprintf(stdout, "depwatch %s (commit %s, %s, %s/%s)\n", version, rev[:min(len(rev), 12)], runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}

// terminationLogPath is where the kubelet reads a container's termination message from, so
// `kubectl describe pod` shows what a Job's run did or why it refused to start.
var terminationLogPath = "/dev/termination-log"

// writeTerminationMessage writes msg only when the file already exists: inside a pod the
// kubelet mounts it; outside one we must not create files under /dev.
func writeTerminationMessage(msg string) {
	f, err := os.OpenFile(terminationLogPath, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	defer f.Close()
	// The kubelet keeps at most 4096 bytes of it.
	if len(msg) > 4000 {
		msg = msg[:4000]
	}
	_, _ = f.WriteString(msg + "\n")
}

// memoryLimitShare is the part of the container's memory limit the Go runtime is asked to stay
// under. The rest is for what the runtime does not count: the binary's own pages (about
// 21 MiB of a fresh process's 25 MiB RSS are mapped from the binary, reclaimable by the
// kernel but refaulted when touched) and memory outside the Go heap.
const memoryLimitShare = 0.8

// cgroupMemoryLimitFiles are where a container reads its own memory limit: cgroup v2, then
// cgroup v1.
var cgroupMemoryLimitFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// setSoftMemoryLimit gives the Go runtime a soft memory limit below the container's, so the
// garbage collector runs harder as the heap nears it instead of the kernel killing the
// process: pod-reaper's chart limits its pod to 30Mi, and the Go runtime does not read that
// limit itself. GOMEMLIMIT, when set (even to "off"), wins: the runtime has applied it.
func setSoftMemoryLimit() {
	if limit, ok := softMemoryLimit(os.LookupEnv, os.ReadFile); ok {
		debug.SetMemoryLimit(limit)
	}
}

// softMemoryLimit decides the limit: none when GOMEMLIMIT is set or no container limit is
// found, else memoryLimitShare of the first limit found.
func softMemoryLimit(lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (int64, bool) {
	if _, set := lookup("GOMEMLIMIT"); set {
		return 0, false
	}
	for _, f := range cgroupMemoryLimitFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		if limit, ok := parseCgroupMemoryLimit(string(b)); ok {
			return int64(float64(limit) * memoryLimitShare), true
		}
		return 0, false // the container's cgroup says: no limit
	}
	return 0, false
}

// noCgroupLimit is at or above what cgroup v1 writes for "no limit" (the largest int64 rounded
// down to a page); no real container limit comes near it.
const noCgroupLimit = 1 << 62

// parseCgroupMemoryLimit reads a memory limit file: a number of bytes, or "max" (cgroup v2's
// "no limit").
func parseCgroupMemoryLimit(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= noCgroupLimit {
		return 0, false
	}
	return n, true
}
