package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/depwatch/depwatch/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func versionString() string {
	rev := buildinfo.Revision()
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return fmt.Sprintf("depwatch %s (commit %s, %s, %s/%s)", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func versionMain(_ context.Context, _ []string, _ func(string) (string, bool), stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, versionString())
	return exitOK
}
