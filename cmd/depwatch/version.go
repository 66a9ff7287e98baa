package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func versionString() string {
	rev := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("depwatch %s (commit %s, %s, %s/%s)", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func versionMain(_ context.Context, _ []string, _ func(string) (string, bool), stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, versionString())
	return exitOK
}
