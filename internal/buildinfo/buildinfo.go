// Package buildinfo says which commit a depwatch binary was built from, for `depwatch
// version` and the coordinator's depwatch_build_info.
//
// A build from a git checkout has the commit in Go's build info (vcs.revision). A build
// without one (the Dockerfile's: the build context has no .git) is told it with
//
//	-ldflags "-X github.com/depwatch/depwatch/internal/buildinfo.revision=<commit>"
//
// as hack/image.sh and the Dockerfile do; that value wins over the build info's.
package buildinfo

import "runtime/debug"

// revision is set at build time with -ldflags "-X ...buildinfo.revision=<commit>".
var revision string

// Revision is the full commit the binary was built from, or "unknown".
func Revision() string {
	return revisionOf(revision, debug.ReadBuildInfo)
}

func revisionOf(stamped string, read func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	if info, ok := read(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}
