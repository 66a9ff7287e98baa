package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig finds the API server for the coordinator and for a run outside a pod: an
// explicit kubeconfig path first, then $KUBECONFIG and ~/.kube/config, then the in-cluster
// service account.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if kubeconfig != "" {
			return nil, fmt.Errorf("loading kubeconfig %q: %w", kubeconfig, err)
		}
		return nil, fmt.Errorf("finding the API server (no usable kubeconfig and not running in a cluster): %w", err)
	}
	cfg.UserAgent = "depwatch/" + version
	return cfg, nil
}

// serviceAccountTokenPath is where Kubernetes mounts a pod's service account token (a
// variable for tests).
var serviceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// inPod says whether the process runs in a Kubernetes pod: the kubelet gives every container
// the kubernetes Service's address (KUBERNETES_SERVICE_HOST), and the service account's token
// is mounted at its standard path. A user's shell has neither.
func inPod(lookup func(string) (string, bool)) bool {
	if v, ok := lookup("KUBERNETES_SERVICE_HOST"); ok && v != "" {
		return true
	}
	_, err := os.Stat(serviceAccountTokenPath)
	return err == nil
}

// errKubeconfigInPod refuses --kubeconfig inside a pod (exit 2).
var errKubeconfigInPod = errors.New("--kubeconfig: not accepted inside a pod: a Job talks only to the cluster it runs in, " +
	"with its own service account (run it from a shell to use a kubeconfig)")

// jobRestConfig finds the API server for a Job subcommand (reap, probe). Inside a pod the run
// trusts only the cluster it runs in: the service account's in-cluster config, whatever
// KUBECONFIG or ~/.kube/config say, and so no kubeconfig's server, token file or exec
// credential plugin. A kubeconfig in a pod can only have come from the pod's spec (its env or a
// volume), and whoever wrote that spec must not be able to send the service account's token
// elsewhere, or run a plugin with the Job's rights (docs/security.md). Outside a pod (a user's
// shell), the coordinator's rules: --kubeconfig, $KUBECONFIG, ~/.kube/config. ignored names
// the variables a run in a pod did not follow, for a warning.
func jobRestConfig(kubeconfig string, lookup func(string) (string, bool)) (cfg *rest.Config, ignored []string, err error) {
	if !inPod(lookup) {
		cfg, err = restConfig(kubeconfig)
		return cfg, nil, err
	}
	if kubeconfig != "" {
		return nil, nil, errKubeconfigInPod
	}
	if v, ok := lookup("KUBECONFIG"); ok && v != "" {
		ignored = append(ignored, "KUBECONFIG")
	}
	cfg, err = rest.InClusterConfig()
	if err != nil {
		return nil, ignored, fmt.Errorf("reading the in-cluster configuration of the pod's service account: %w", err)
	}
	cfg.UserAgent = "depwatch/" + version
	return cfg, ignored, nil
}

// countRequests returns a copy of cfg whose client adds every HTTP request it sends to n
// (watches and retries included): what a run cost the API server, for its last line.
func countRequests(cfg *rest.Config, n *atomic.Int64) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			n.Add(1)
			return rt.RoundTrip(req)
		})
	})
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
