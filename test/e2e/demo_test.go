//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// demoLine is what make demo may print, all of it for the person watching: its own progress
// lines, the indented steps (the dependent's state, the weeder's log as sentences), kubectl's
// pod tables and blank lines. Anything else (a kubectl error, an object dump, a path printed
// for scripts) is noise a newcomer should not have to read past.
var demoLine = regexp.MustCompile(`^(\[demo \+ *\d+s\] .+|    \S.*|NAME +READY +STATUS.*|(dependent|upstream)-\S+ +\d+/\d+ .*|)$`)

// TestDemoRunsAsTheREADMESays runs hack/demo.sh (make demo) as the README and docs/development.md say, with a
// KUBECONFIG exported that names no cluster: the demo uses the local cluster's kubeconfig
// whatever KUBECONFIG says (only DEMO_KUBECONFIG names another), installs the local overlay,
// which the lab already is, plays one outage and shows the weeder beat the kubelet's back-off.
func TestDemoRunsAsTheREADMESays(t *testing.T) {
	parallelLong(t, 60*time.Second)
	// A hang catcher: the demo takes about a minute on a running cluster; on a loaded one its
	// image build and install alone took two.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		_, _ = runKubectl("delete", "namespace", "depwatch-demo", "--ignore-not-found", "--wait=false")
	})
	cmd := exec.CommandContext(ctx, repoRoot+"/hack/demo.sh")
	cmd.Dir = repoRoot
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DEMO_KUBECONFIG=") })
	cmd.Env = append(env, "KUBECONFIG=/nonexistent/kubeconfig-the-demo-ignores")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo failed (%v):\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"OUTAGE: scaling the upstream to 0", "RECOVERY: scaling the upstream back to 1",
		"Deleted pod depwatch-demo/dependent-", "after the upstream came back"} {
		if !strings.Contains(text, want) {
			t.Errorf("make demo's output has no %q:\n%s", want, text)
		}
	}
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if !demoLine.MatchString(l) {
			t.Errorf("make demo printed a line a person should not have to read: %q", l)
		}
	}
	if m := regexp.MustCompile(`the dependent is Ready (\S+)s after`).FindStringSubmatch(text); m != nil {
		t.Logf("make demo: the dependent was Ready %ss after the upstream came back", m[1])
	}
}
