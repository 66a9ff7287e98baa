package main

import (
	"fmt"

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
