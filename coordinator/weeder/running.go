package weeder

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/depwatch/depwatch/jobs"
)

// live is one applied config and what the weeder's decisions derive from it. A reload swaps
// it whole; each reconcile reads it once, so one decision never mixes two configs.
type live struct {
	cfg      *Config
	tpl      jobs.Template // jobTemplate resolved (namespace, image)
	names    map[string]bool
	nsSel    labels.Selector
	launcher *jobs.Launcher
}

func newLive(client kubernetes.Interface, cfg *Config, tpl jobs.Template) *live {
	l := &live{cfg: cfg, tpl: tpl, names: map[string]bool{}, nsSel: cfg.NamespaceSelector(),
		launcher: &jobs.Launcher{Client: client, Template: tpl}}
	if cfg.Namespaces != nil {
		for _, n := range cfg.Namespaces.Names {
			l.names[n] = true
		}
	}
	return l
}

// configured: the service has an entry in the config.
func (l *live) configured(svc string) bool { return l.cfg.Configured(svc) }

// live returns the running config.
func (c *Controller) live() *live { return c.cur.Load() }
