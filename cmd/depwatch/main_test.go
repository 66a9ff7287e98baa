package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDefaultCommandIsReapWhenTheEnvironmentConfiguresIt: pod-reaper's Deployments start the
// image with no command and no arguments; depwatch started so runs reap whenever one of
// reap's variables is set, and leaves every explicit command line as it is.
func TestDefaultCommandIsReapWhenTheEnvironmentConfiguresIt(t *testing.T) {
	cases := []struct {
		name         string
		args         []string
		env          map[string]string
		want         []string
		wantImplicit bool
	}{
		{"no args, a pod-reaper rule set: reap", nil, map[string]string{"MAX_DURATION": "1h"}, []string{"reap"}, true},
		{"no args, only a schedule: reap (which names the missing rule)", nil, map[string]string{"SCHEDULE": "@every 1m"}, []string{"reap"}, true},
		{"no args, a variable set to empty: reap (which names it)", []string{}, map[string]string{"CHAOS_CHANCE": ""}, []string{"reap"}, true},
		{"no args, no reap variable: usage", nil, map[string]string{"HOME": "/root", "LOG_LEVEL": "debug"}, nil, false},
		{"no args, empty environment: usage", nil, nil, nil, false},
		{"reap stays reap", []string{"reap"}, map[string]string{"MAX_DURATION": "1h"}, []string{"reap"}, false},
		{"--help stays --help with a reap environment", []string{"--help"}, map[string]string{"MAX_DURATION": "1h"}, []string{"--help"}, false},
		{"an unknown command stays unknown", []string{"reaper"}, map[string]string{"MAX_DURATION": "1h"}, []string{"reaper"}, false},
		{"a flag alone is not a command", []string{"--kubeconfig=x"}, map[string]string{"MAX_DURATION": "1h"}, []string{"--kubeconfig=x"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, implicit := defaultCommand(c.args, probeTestLookup(c.env))
			if !slices.Equal(got, c.want) || implicit != c.wantImplicit {
				t.Errorf("defaultCommand(%q) = %q, %v; want %q, %v", c.args, got, implicit, c.want, c.wantImplicit)
			}
		})
	}
}

// TestDispatchWithNoArgsRunsReapAndLeavesEveryOtherStartAsItWas runs the whole dispatch, as
// main does, and tells which command ran by what it says.
func TestDispatchWithNoArgsRunsReapAndLeavesEveryOtherStartAsItWas(t *testing.T) {
	// KUBECONFIG names a file that does not exist and the test is not in a pod: a reap run
	// that starts cannot find an API server and exits 1 having touched nothing.
	t.Setenv("KUBECONFIG", t.TempDir()+"/missing")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	pods := map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "SCHEDULE": "@every 1m"}
	cases := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{"no args with pod-reaper's environment: reap runs", nil, pods, exitFailure,
			[]string{"Cannot reach the Kubernetes API server; no pod was touched."}, nil},
		{"no args with a reap environment reap refuses: reap's refusal, and what no command meant", nil,
			map[string]string{"SCHEDULE": "@every 1m"}, exitBadConfig,
			nil, []string{"depwatch reap: invalid configuration, nothing was done:", "depwatch started without a command runs reap"}},
		{"no args and no reap variable: usage and why, exit 2", nil, map[string]string{"PATH": "/bin"}, exitBadConfig,
			nil, []string{"Usage: depwatch [<command>] [flags]", "none of reap's environment variables is set"}},
		{"reap explicitly: the same run", []string{"reap"}, pods, exitFailure,
			[]string{"Cannot reach the Kubernetes API server; no pod was touched."}, nil},
		{"--help: usage on stdout, saying no command means reap", []string{"--help"}, pods, exitOK,
			[]string{"Without a command depwatch runs reap", "reap ", "coordinator", "probe"}, nil},
		{"reap --help: reap's help, saying it is the default", []string{"reap", "--help"}, nil, exitOK,
			[]string{"Usage: depwatch reap", "(no command: reap", "pods/eviction"}, nil},
		{"an unknown command: usage, exit 2", []string{"reaper"}, pods, exitBadConfig,
			nil, []string{`depwatch: unknown command "reaper"`, "Usage: depwatch"}},
		{"version", []string{"version"}, pods, exitOK, []string{"depwatch "}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(c.args, probeTestLookup(c.env), &stdout, &stderr)
			if code != c.wantCode {
				t.Fatalf("exit = %d, want %d\nstdout: %s\nstderr: %s", code, c.wantCode, stdout.String(), stderr.String())
			}
			for _, want := range c.wantStdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
			for _, want := range c.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			for _, trace := range []string{"goroutine ", "panic"} {
				if strings.Contains(stderr.String(), trace) {
					t.Errorf("stack trace (%q) on stderr:\n%s", trace, stderr.String())
				}
			}
		})
	}
}

func TestSoftMemoryLimitIsAShareOfTheContainersUnlessGOMEMLIMITIsSet(t *testing.T) {
	const mi = 1 << 20
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
	}
	v2, v1 := cgroupMemoryLimitFiles[0], cgroupMemoryLimitFiles[1]
	cases := []struct {
		name   string
		env    map[string]string
		files  map[string]string
		want   int64
		wantOK bool
	}{
		{"pod-reaper's 30Mi, cgroup v2", nil, map[string]string{v2: "31457280\n"}, 30 * mi * 8 / 10, true},
		{"cgroup v1", nil, map[string]string{v1: "134217728\n"}, 128 * mi * 8 / 10, true},
		{"v2 wins over v1", nil, map[string]string{v2: "31457280", v1: "134217728"}, 30 * mi * 8 / 10, true},
		{"no limit, cgroup v2", nil, map[string]string{v2: "max\n"}, 0, false},
		{"no limit, cgroup v1", nil, map[string]string{v1: "9223372036854771712\n"}, 0, false},
		{"no cgroup files (not in a container)", nil, nil, 0, false},
		{"garbage", nil, map[string]string{v2: "lots"}, 0, false},
		{"GOMEMLIMIT set wins", map[string]string{"GOMEMLIMIT": "100MiB"}, map[string]string{v2: "31457280"}, 0, false},
		{"GOMEMLIMIT=off wins", map[string]string{"GOMEMLIMIT": "off"}, map[string]string{v2: "31457280"}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := softMemoryLimit(probeTestLookup(c.env), files(c.files))
			if got != c.want || ok != c.wantOK {
				t.Errorf("softMemoryLimit = %d, %v; want %d, %v", got, ok, c.want, c.wantOK)
			}
		})
	}
}
