package coordinator

import (
	"os"
	"path/filepath"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/test/upstream"
)

// twoEndpoints is one EndpointSlice of a service with two members, ready as given.
func twoEndpoints(first, second bool) []*discoveryv1.EndpointSlice {
	ep := func(addr string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	}
	return []*discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{ep("10.0.0.1", first), ep("10.0.0.2", second)}}}
}

// Under dependency-watchdog's weeder command, gardenlet's ConfigMap as it is: a service is
// back when all its endpoints are ready (dependency-watchdog v1.6+ on EndpointSlices), or,
// where the service account reads only v1 Endpoints (dependency-watchdog up to v1.5), when
// one is. depwatch's own coordinator keeps one ready endpoint as its default, and a
// service's own readyWhen wins under both commands.
func TestWhenAServiceCountsAsBackFollowsTheCommandUnlessItsEntrySays(t *testing.T) {
	dir := t.TempDir()
	gardenlet := filepath.Join(dir, "gardenlet.yaml")
	if err := os.WriteFile(gardenlet, []byte(upstream.GardenletWeederConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	counted := filepath.Join(dir, "counted.yaml")
	if err := os.WriteFile(counted, []byte(`servicesAndDependantSelectors:
  etcd-main-client:
    readyWhen: any
    podSelectors: [{matchLabels: {role: apiserver}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	oneOfTwo, both := twoEndpoints(true, false), twoEndpoints(true, true)
	for _, tc := range []struct {
		name         string
		role         roles.Role
		file         string
		useEndpoints bool // the cluster grants Endpoints but no EndpointSlices
		want         podstate.ReadyWhen
	}{
		{name: "dependency-watchdog's weeder command on EndpointSlices: all ready", role: roles.Weeder, file: gardenlet, want: podstate.ReadyAll},
		{name: "dependency-watchdog's weeder command on v1 Endpoints: one ready address", role: roles.Weeder, file: gardenlet, useEndpoints: true, want: podstate.ReadyAny},
		{name: "depwatch's coordinator: one ready endpoint", role: roles.Coordinator, file: gardenlet, want: podstate.ReadyAny},
		{name: "a service's own readyWhen wins under dependency-watchdog's command", role: roles.Weeder, file: counted, want: podstate.ReadyAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--config-file=" + tc.file}
			var opts Options
			var err error
			if tc.role == roles.Coordinator {
				opts, err = ParseFlags(args, noEnv, nil)
			} else {
				opts, _, err = ParseDWDFlags(tc.role, args, noEnv, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := opts.LoadConfig()
			if err != nil {
				t.Fatal(err)
			}
			if tc.useEndpoints {
				opts.UseEndpointsInstead(cfg)
			}
			when := cfg.ReadyWhenOf("etcd-main-client")
			if when != tc.want {
				t.Fatalf("etcd-main-client counts as back when %s, want %s", when, tc.want)
			}
			if tc.useEndpoints {
				return // v1 Endpoints are read by EndpointsObservation, which has no readyWhen
			}
			if got := folded(both).Ready(when); !got {
				t.Errorf("both endpoints ready: back %v, want true", got)
			}
			if got, want := folded(oneOfTwo).Ready(when), tc.want == podstate.ReadyAny; got != want {
				t.Errorf("one of two endpoints ready: back %v, want %v", got, want)
			}
		})
	}
}

// folded is the slices as the weeder's fold holds them after one event each.
func folded(slices []*discoveryv1.EndpointSlice) podstate.ServiceSlices {
	var v podstate.ServiceSlices
	for _, sl := range slices {
		v.Apply(sl, false)
	}
	return v
}
