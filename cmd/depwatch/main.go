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
	"syscall"

	// Zone data for SCHEDULE=CRON_TZ=...: the distroless image has none of its own.
	_ "time/tzdata"

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
