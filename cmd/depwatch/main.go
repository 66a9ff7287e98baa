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
	run     func(ctx context.Context, args []string) int
}

func commands() []command {
	return []command{
		{"reap", "One reaper run: kill pods that match rules (pod-reaper's environment contract).", runReap},
		{"coordinator", "Always-on: watch services and control planes, launch weeder and probe Jobs.", runCoordinator},
		{"probe", "One meltdown-protection probe of a control-plane namespace: scale its controllers down or up.", runProbe},
		{"weeder", "dependency-watchdog's weeder command, as gardenlet starts it: the coordinator's weeder alone.", runWeeder},
		{"prober", "dependency-watchdog's prober command, as gardenlet starts it: the coordinator's prober alone.", runProber},
		{"version", "Print the version and exit.", runVersion},
	}
}

// DWDName is dependency-watchdog's binary name: the image has /usr/local/bin/dependency-watchdog,
// the binary under that name, so gardenlet's command runs depwatch as it is.
const DWDName = "dependency-watchdog"

func main() {
	os.Exit(dispatchAs(os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// dispatchAs runs the command args name. Invoked as dependency-watchdog (argv[0]'s base
// name), it answers as dependency-watchdog does where it has no command: its usage, exit 0.
func dispatchAs(argv0 string, args []string, stdout, stderr io.Writer) int {
	if filepath.Base(argv0) == DWDName && len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	return dispatch(args, stdout, stderr)
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitBadConfig
	}
	switch args[0] {
	case "-h", "--help", "-help":
		usage(stdout)
		return exitOK
	case "help":
		// dependency-watchdog's `help <command>`; depwatch's `help` alone.
		if len(args) > 1 {
			return dispatch([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	case "--version", "-version":
		return runVersion(context.Background(), nil)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			// SIGTERM (a pod being stopped) and SIGINT both mean: finish what is in hand, then stop.
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return c.run(ctx, args[1:])
		}
	}
	fmt.Fprintf(stderr, "depwatch: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitBadConfig
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "depwatch keeps Kubernetes workloads healthy when something they depend on fails.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: depwatch <command> [flags]")
	fmt.Fprintln(w, "       dependency-watchdog weeder|prober [flags]   (the same binary under dependency-watchdog's name)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'depwatch <command> --help' for every setting of a command and its default.")
}
