// Command testapp is the workload of depwatch's end-to-end tests: one static binary that
// plays an upstream service, a dependent of it, or a pod that simply fails.
//
//	testapp exit CODE            exit at once with CODE (a crash-looping container)
//	testapp sleep                run until SIGTERM
//	testapp once FILE            the first time (FILE absent): create FILE and exit 0; later
//	                             (FILE on an emptyDir, kept across restarts): run until SIGTERM.
//	                             A container that exits exactly once, then runs.
//	testapp serve ADDR           accept TCP connections on ADDR until SIGTERM (an upstream)
//	testapp depend ADDR          exit 1 unless ADDR accepts a connection; then check it every
//	                             second and exit 1 when it stops (a dependent that crash-loops
//	                             while its upstream is down)
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testapp exit CODE | sleep | once FILE | serve ADDR | depend ADDR")
		os.Exit(2)
	}
	arg := func() string {
		if len(os.Args) < 3 {
			fmt.Fprintf(os.Stderr, "testapp %s: missing argument\n", os.Args[1])
			os.Exit(2)
		}
		return os.Args[2]
	}
	switch os.Args[1] {
	case "exit":
		code, err := strconv.Atoi(arg())
		if err != nil {
			fmt.Fprintln(os.Stderr, "testapp exit: CODE must be an integer")
			os.Exit(2)
		}
		fmt.Printf("testapp: exiting with code %d\n", code)
		os.Exit(code)
	case "sleep":
		waitForSignal()
	case "once":
		marker := arg()
		if _, err := os.Stat(marker); os.IsNotExist(err) {
			if err := os.WriteFile(marker, []byte("exited once\n"), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "testapp once: %v\n", err)
				os.Exit(2)
			}
			fmt.Println("testapp: first run, exiting 0")
			os.Exit(0)
		}
		fmt.Println("testapp: restarted, running")
		waitForSignal()
	case "serve":
		ln, err := net.Listen("tcp", arg())
		if err != nil {
			fmt.Fprintf(os.Stderr, "testapp serve: %v\n", err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		fmt.Printf("testapp: serving on %s\n", ln.Addr())
		waitForSignal()
		_ = ln.Close()
	case "depend":
		addr := arg()
		if !reachable(addr) {
			fmt.Fprintf(os.Stderr, "testapp: upstream %s is down, exiting 1\n", addr)
			os.Exit(1)
		}
		fmt.Printf("testapp: upstream %s is up, running\n", addr)
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
		tick := time.NewTicker(time.Second)
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if !reachable(addr) {
					fmt.Fprintf(os.Stderr, "testapp: lost upstream %s, exiting 1\n", addr)
					os.Exit(1)
				}
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "testapp: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func waitForSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	<-ch
}
