package weeder

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/depwatch/depwatch/jobs"
)

// runningConfig is the weeder's config and what its decisions derive from it.
type runningConfig struct {
	cfg      *Config
	tpl      jobs.Template // jobTemplate resolved (namespace, image)
	names    map[string]bool
	nsSel    labels.Selector
	launcher *jobs.Launcher
}

func newRunningConfig(exec jobs.Executor, cfg *Config, tpl jobs.Template) *runningConfig {
	rc := &runningConfig{cfg: cfg, tpl: tpl, names: map[string]bool{}, nsSel: cfg.NamespaceSelector(),
		launcher: &jobs.Launcher{Executor: exec, Template: tpl}}
	if cfg.Namespaces != nil {
		for _, n := range cfg.Namespaces.Names {
			rc.names[n] = true
		}
	}
	return rc
}
