// Command pause is the local cluster's pod sandbox ("pause") program: it blocks until
// SIGTERM or SIGINT and then exits 0. Built static (CGO_ENABLED=0) by hack/image.sh
// into the image localhost/pause:local, which containerd uses as its sandbox_image.
//
// Test workloads can reuse the image as a crashing container:
//
//	args: ["-exit", "1"]                  exit 1 at once (real CrashLoopBackOff)
//	args: ["-exit", "1", "-after", "5s"]  run 5 s, then exit 1
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	exit := flag.Int("exit", -1, "exit with this code (after -after) instead of blocking")
	after := flag.Duration("after", 0, "with -exit: how long to run before exiting")
	flag.Parse()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if *exit >= 0 {
		select {
		case <-time.After(*after):
			fmt.Fprintf(os.Stderr, "pause: exiting with code %d as asked\n", *exit)
			os.Exit(*exit)
		case <-sigs:
			os.Exit(0)
		}
	}
	<-sigs
	os.Exit(0)
}
