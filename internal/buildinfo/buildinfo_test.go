package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestRevisionPrefersTheStampedCommitOverGoBuildInfo(t *testing.T) {
	withVCS := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "from-build-info"}}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, c := range []struct {
		name, stamped string
		read          func() (*debug.BuildInfo, bool)
		want          string
	}{
		{"ldflags given", "0123456789abcdef", withVCS, "0123456789abcdef"},
		{"git checkout build", "", withVCS, "from-build-info"},
		{"neither (a build context without .git)", "", none, "unknown"},
	} {
		if got := revisionOf(c.stamped, c.read); got != c.want {
			t.Errorf("%s: Revision() = %q; want %q", c.name, got, c.want)
		}
	}
}
