package main

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig finds the API server: an explicit kubeconfig path first, then $KUBECONFIG and
// ~/.kube/config, then the in-cluster service account (the normal case inside a Job).
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
