package coordinator

// Live config reload. The config file is usually a mounted ConfigMap, which the
// kubelet updates by swapping a symlink (..data), so the file is polled and its content
// hashed instead of watched with inotify. Each new content is parsed and validated as at
// start, then:
//
//   - invalid (or unreadable): the running config stays; the error is logged once, naming
//     the fields; depwatch_coordinator_config_valid is 0 and /readyz fails with the reason
//     until the file is fixed;
//   - valid, but it changes what the informers were built for (RestartReasons): none of it is
//     applied; a warning names the fields and depwatch_coordinator_config_restart_required
//     is 1 until the coordinator restarts or the file is put back;
//   - valid otherwise: swapped in whole for the next decisions (one log line lists the changed
//     fields); no informer restarts.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/jobs"
)

// DefaultConfigReloadInterval is how often the config file is read again.
const DefaultConfigReloadInterval = 10 * time.Second

// RestartReasons lists what a reload to next cannot apply, because the informers were built
// from base (the config at start) for something else; each entry names the field. Empty:
// next can be swapped in live. Both configs have the flags applied (Options.applyTo).
func RestartReasons(base, next *Config) []string {
	var out []string
	var added []string
	for _, s := range next.Services() {
		if _, ok := base.ServicesAndDependantSelectors[s]; !ok {
			added = append(added, s)
		}
	}
	if len(added) > 0 {
		out = append(out, fmt.Sprintf("servicesAndDependantSelectors: new service(s) %s: the endpoints watch covers only the services configured at start", strings.Join(added, ", ")))
	}
	if base.UseEndpoints != next.UseEndpoints {
		out = append(out, "useEndpoints: switching between EndpointSlices and v1 Endpoints replaces the endpoints watch")
	}
	if next.NeedsNamespaceInformer() && !base.NeedsNamespaceInformer() {
		out = append(out, "namespaces.selector: set, but there was none at start, so namespaces are not watched")
	}
	switch {
	case (base.Prober == nil) != (next.Prober == nil):
		out = append(out, "prober: added or removed: the prober's watches exist only if it is configured at start")
	case base.Prober != nil && base.Prober.Selector().String() != next.Prober.Selector().String():
		out = append(out, fmt.Sprintf("prober.namespaceSelector: %q, but the namespace watch was built for %q", next.Prober.Selector().String(), base.Prober.Selector().String()))
	}
	if base.JobTemplate.Namespace != next.JobTemplate.Namespace {
		out = append(out, fmt.Sprintf("jobTemplate.namespace: %q, but the Job watches are in %q", next.JobTemplate.Namespace, base.JobTemplate.Namespace))
	}
	return out
}

// nested are the fields whose changes are reported one level down.
var nested = map[string]bool{"servicesAndDependantSelectors": true, "namespaces": true, "jobTemplate": true, "prober": true}

// ConfigChanges lists the fields that differ between two configs, by path (a service's
// entry, a jobTemplate or prober field); values are compared as they take effect, so
// "5m" and "300s" are the same, and comments or order do not count.
func ConfigChanges(old, next *Config) []string {
	var out []string
	var diff func(prefix string, a, b json.RawMessage, depth int)
	diff = func(prefix string, a, b json.RawMessage, depth int) {
		if bytes.Equal(a, b) {
			return
		}
		var am, bm map[string]json.RawMessage
		if depth > 0 && json.Unmarshal(a, &am) == nil && json.Unmarshal(b, &bm) == nil && am != nil && bm != nil {
			for _, k := range unionKeys(am, bm) {
				diff(prefix+"."+k, am[k], bm[k], depth-1)
			}
			return
		}
		out = append(out, prefix)
	}
	a, _ := json.Marshal(old)
	b, _ := json.Marshal(next)
	var am, bm map[string]json.RawMessage
	_ = json.Unmarshal(a, &am)
	_ = json.Unmarshal(b, &bm)
	for _, k := range unionKeys(am, bm) {
		depth := 0
		if nested[k] {
			depth = 1
		}
		diff(k, am[k], bm[k], depth)
	}
	return out
}

func unionKeys(a, b map[string]json.RawMessage) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// reloadState is what the coordinator knows of its config file since start.
type reloadState struct {
	mu   sync.Mutex
	seen string // hash of the content last read; "" before the first read
	// problem: why the file is not in use (its errors, one per line); "" while it is valid.
	problem string
	since   time.Time // when problem began
	restart []string  // valid, but needs a restart to apply (RestartReasons)
}

// ConfigProblem says why the config file is not in use ("" while it is valid) and since when.
func (c *Coordinator) ConfigProblem() (string, time.Time) {
	c.reload.mu.Lock()
	defer c.reload.mu.Unlock()
	return c.reload.problem, c.reload.since
}

// watchConfig reads the config file every interval until ctx ends (see checkConfig).
func (c *Coordinator) watchConfig(ctx context.Context, path string, every time.Duration) {
	c.log.WithFields(logrus.Fields{"configFile": path, "interval": every.String()}).Info("Watching the config file for changes.")
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.checkConfig(ctx, path)
		}
	}
}

// checkConfig reads the config file once and, if its content is new, applies it, refuses it
// as invalid, or holds it back until a restart.
func (c *Coordinator) checkConfig(ctx context.Context, path string) {
	data, readErr := c.readConfig(path)
	if readErr != nil {
		data = []byte("read error: " + readErr.Error())
	}
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	c.reload.mu.Lock()
	first, same := c.reload.seen == "", c.reload.seen == sum
	c.reload.mu.Unlock()
	if same {
		return
	}
	log := c.log.WithFields(logrus.Fields{"configFile": path, "sha256": sum[:12]})
	var next *Config
	var err error
	if readErr != nil {
		err = fmt.Errorf("cannot read it: %w", readErr)
	} else {
		next, err = ParseConfig(data)
	}
	if err == nil {
		c.opts.applyTo(next)
		c.logIgnored(c.cur.Load().cfg.Warnings(), next)
	}
	if err != nil {
		c.configInvalid(sum, err, log)
		return
	}
	cur := c.cur.Load()
	changed := ConfigChanges(cur.cfg, next)
	if reasons := RestartReasons(c.base, next); len(reasons) > 0 {
		c.settle(sum, "", reasons)
		c.metrics.ConfigReloads.WithLabelValues(ReloadRestartRequired).Inc()
		log.WithFields(logrus.Fields{"changed": changed, "needsRestart": reasons}).
			Warn("The config file changed fields that take effect only when the coordinator restarts: none of the change is applied and the previous config keeps running. Restart it (kubectl rollout restart deployment/depwatch-coordinator) to apply the file.")
		return
	}
	if len(changed) == 0 {
		c.reload.mu.Lock()
		wasBad := c.reload.problem != "" || len(c.reload.restart) > 0
		c.reload.mu.Unlock()
		c.settle(sum, "", nil)
		if !first {
			c.metrics.ConfigReloads.WithLabelValues(ReloadSuccess).Inc()
			c.metrics.ConfigLastSuccess.Set(float64(c.now().Unix()))
		}
		if wasBad {
			log.Info("The config file is valid again and the same as the running config: nothing to change.")
		}
		return
	}
	tpl := cur.tpl
	if slices.ContainsFunc(changed, func(f string) bool { return strings.HasPrefix(f, "jobTemplate") }) {
		if tpl, err = c.resolveTemplate(ctx, next.JobTemplate); err != nil {
			// Not remembered as seen: read and tried again at the next interval.
			c.configInvalid("", fmt.Errorf("jobTemplate: %w", err), log)
			return
		}
	}
	c.cur.Store(&running{cfg: next, tpl: tpl})
	if c.prober != nil {
		c.prober.Apply(next.Prober, tpl)
	}
	c.settle(sum, "", nil)
	c.metrics.ConfigReloads.WithLabelValues(ReloadSuccess).Inc()
	c.metrics.ConfigLastSuccess.Set(float64(c.now().Unix()))
	log.WithField("changed", changed).Info("Config file reloaded: the changes apply from the next decision on.")
	if c.weeder != nil {
		// When namespaces or services changed, which services count may have changed: the
		// weeder looks at each again (a newly watched one counts as first seen, an unwatched
		// one is forgotten).
		c.weeder.Apply(&next.Config, tpl, slices.ContainsFunc(changed, func(f string) bool {
			return strings.HasPrefix(f, "namespaces") || strings.HasPrefix(f, "servicesAndDependantSelectors")
		}))
	}
}

// configInvalid keeps the running config and reports the file's problem; sum "" means
// "try this content again next time".
func (c *Coordinator) configInvalid(sum string, err error, log logrus.FieldLogger) {
	c.settle(sum, err.Error(), nil)
	c.metrics.ConfigReloads.WithLabelValues(ReloadFailure).Inc()
	log.WithField("errors", strings.Split(err.Error(), "\n")).
		Error("The config file is invalid: keeping the last good config; /readyz fails and depwatch_coordinator_config_valid is 0 until the file is fixed.")
}

// settle records the outcome of reading content sum and sets the gauges to match.
func (c *Coordinator) settle(sum, problem string, restart []string) {
	c.reload.mu.Lock()
	if sum != "" {
		c.reload.seen = sum
	}
	if problem != "" && c.reload.problem == "" {
		c.reload.since = c.now()
	}
	c.reload.problem, c.reload.restart = problem, restart
	c.reload.mu.Unlock()
	c.metrics.ConfigValid.Set(boolGauge(problem == ""))
	c.metrics.ConfigRestartRequired.Set(boolGauge(len(restart) > 0))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// resolveTemplate fills a reloaded jobTemplate as the one at start was filled.
func (c *Coordinator) resolveTemplate(ctx context.Context, t jobs.Template) (jobs.Template, error) {
	if c.resolve != nil {
		return c.resolve(ctx, t)
	}
	base := c.cur.Load().tpl
	if t.Namespace == "" {
		t.Namespace = base.Namespace
	}
	if t.Image == "" {
		t.Image = base.Image
		if t.ImagePullPolicy == "" {
			t.ImagePullPolicy = base.ImagePullPolicy
		}
	}
	return t, nil
}

// readyz answers /readyz: ready once the caches have synced, unless the config file has
// become invalid (the coordinator still works, with its last good config).
func (c *Coordinator) readyz(w http.ResponseWriter, _ *http.Request) {
	if !c.Ready() {
		http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
		return
	}
	if problem, since := c.ConfigProblem(); problem != "" {
		http.Error(w, fmt.Sprintf("config file %s is invalid (since %s); running with the last good config until it is fixed:\n%s",
			c.opts.ConfigFile, since.UTC().Format(time.RFC3339), problem), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
	// Shards whose probe Job cannot start: the coordinator itself is fine (ready), but a
	// person looking here should see that some control planes are not probed.
	if c.prober != nil {
		for _, line := range c.prober.StuckShards() {
			fmt.Fprintln(w, line)
		}
	}
}
