//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hostCoordinator is `depwatch coordinator` built from this tree and run as a process of the
// test, outside the cluster (the lab's coordinator runs the last imported image, with its own
// config): for tests that need this tree's coordinator code, or a config of their own.
type hostCoordinator struct {
	mu  sync.Mutex
	out bytes.Buffer
}

// startHostCoordinator runs `depwatch coordinator args...` with env added to the test's own
// (KUBECONFIG: the local cluster) until the test ends, then stops it with SIGTERM; its output
// is logged if the test failed. Like a Deployment's container (restartPolicy Always), the
// process is started again whenever it exits before the test ends: a coordinator whose
// config file changed exits 0 to be restarted with it.
func startHostCoordinator(t *testing.T, args, env []string) *hostCoordinator {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "depwatch")
	build := exec.Command("go", "build", "-o", bin, "./cmd/depwatch")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := &hostCoordinator{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cmd := exec.CommandContext(ctx, bin, append([]string{"coordinator"}, args...)...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = 30 * time.Second
			cmd.Stdout, cmd.Stderr = lockedWriter{&c.mu, &c.out}, lockedWriter{&c.mu, &c.out}
			err := cmd.Run()
			c.mu.Lock()
			fmt.Fprintf(&c.out, "e2e: the coordinator process ended (%v)\n", err)
			c.mu.Unlock()
			select { // a second between starts, as a kubelet's back-off would allow at least
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("coordinator output:\n%s", c.output())
		}
	})
	return c
}

// output is what the coordinator has written so far.
func (c *hostCoordinator) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
