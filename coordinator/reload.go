package coordinator

// Live config reload, for operators who edit the ConfigMap in place. The file is polled and
// its content hashed (a mounted ConfigMap changes by a symlink swap, which inotify on the
// file does not see). A new content is parsed and validated as at start, then applied whole
// or not at all:
//
//	applied live                                 needs a restart (RestartReasons)
//	watchDuration, gracePeriod, armWeeder,       a service not configured at start
//	  armedMaxWait, reapCooldown                 useEndpoints
//	a service's podSelectors and arm             namespaces.selector where there was none
//	removing a service                           adding or removing prober
//	namespaces.names; namespaces.selector        prober.namespaceSelector
//	  when one was set at start                  jobTemplate.namespace
//	jobTemplate but its namespace                every command-line flag
//	prober: every field but namespaceSelector
//
// The right column is what the informers were built for; rebuilding them in place would
// mean tearing down workers, prober and leader election inside one process, which a pod
// restart does more simply. Outcomes of a read:
//
//   - invalid or unreadable: the running config stays; logged once ("The config file is
//     invalid: keeping the last good config"), depwatch_coordinator_config_valid 0 and /readyz
//     failing with the problems until the file is fixed;
//   - valid but needing a restart: none of it is applied; a warning names the fields and
//     depwatch_coordinator_config_restart_required is 1 until a restart or the file is put back;
//   - valid: swapped in for the next decisions, one log line listing the changed fields.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/jobs"
)

// DefaultConfigReloadInterval is how often the config file is read again.
const DefaultConfigReloadInterval = 10 * time.Second

// RestartReasons lists what a reload to next cannot apply because the informers were built
// from base (the config at start) for something else, each naming its field. Empty: next can
// be swapped in live. Both configs have the flags applied (Options.applyTo).
func RestartReasons(base, next *Config) []string {
	var out []string
	var added []string
	for _, s := range next.Services() {
		if !base.Configured(s) {
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

// nested are the sections whose changes are named one level down (a service, a field).
var nested = map[string]bool{"servicesAndDependantSelectors": true, "namespaces": true, "jobTemplate": true, "prober": true}

// ConfigChanges lists the fields that differ between two configs, by path (a service's
// entry, a jobTemplate or prober field). Values are compared as they take effect, so "5m"
// and "300s" are the same, and comments or order do not count.
func ConfigChanges(old, next *Config) []string {
	a, b := asMap(old), asMap(next)
	var out []string
	for _, k := range unionKeys(a, b) {
		if reflect.DeepEqual(a[k], b[k]) {
			continue
		}
		am, aMap := a[k].(map[string]any)
		bm, bMap := b[k].(map[string]any)
		if !nested[k] || !aMap || !bMap {
			out = append(out, k)
			continue
		}
		for _, sub := range unionKeys(am, bm) {
			if !reflect.DeepEqual(am[sub], bm[sub]) {
				out = append(out, k+"."+sub)
			}
		}
	}
	return out
}

// asMap is v as its JSON object: the form in which two configs compare as they take effect.
func asMap(v any) map[string]any {
	var m map[string]any
	data, _ := json.Marshal(v) // a decoded config: cannot fail
	_ = json.Unmarshal(data, &m)
	return m
}

func unionKeys(a, b map[string]any) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
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
	if readErr != nil {
		c.configInvalid(sum, fmt.Errorf("cannot read it: %w", readErr), log)
		return
	}
	next, err := ParseConfig(data)
	if err != nil {
		c.configInvalid(sum, err, log)
		return
	}
	c.opts.applyTo(next)
	c.logIgnored(c.cur.Load().cfg.Warnings(), next)
	c.applyConfig(ctx, sum, first, next, log)
}

// applyConfig swaps the valid config next in, or holds it back when it needs a restart.
func (c *Coordinator) applyConfig(ctx context.Context, sum string, first bool, next *Config, log logrus.FieldLogger) {
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
		if problem, _ := c.ConfigProblem(); problem != "" || c.restartPending() {
			log.Info("The config file is valid again and the same as the running config: nothing to change.")
		}
		c.settle(sum, "", nil)
		if !first { // the first read is of the content loaded at start
			c.reloaded()
		}
		return
	}
	tpl := cur.tpl
	if changedUnder(changed, "jobTemplate") {
		var err error
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
	c.reloaded()
	log.WithField("changed", changed).Info("Config file reloaded: the changes apply from the next decision on.")
	if c.weeder != nil {
		// Which services count may have changed: the weeder looks at each again (a newly
		// watched one counts as first seen, an unwatched one is forgotten).
		c.weeder.Apply(&next.Config, tpl, changedUnder(changed, "namespaces") || changedUnder(changed, "servicesAndDependantSelectors"))
	}
}

func changedUnder(changed []string, section string) bool {
	return slices.ContainsFunc(changed, func(f string) bool { return strings.HasPrefix(f, section) })
}

func (c *Coordinator) restartPending() bool {
	c.reload.mu.Lock()
	defer c.reload.mu.Unlock()
	return len(c.reload.restart) > 0
}

func (c *Coordinator) reloaded() {
	c.metrics.ConfigReloads.WithLabelValues(ReloadSuccess).Inc()
	c.metrics.ConfigLastSuccess.Set(float64(c.now().Unix()))
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
