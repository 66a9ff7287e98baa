package coordinator

// The config file is watched, not reloaded: a change takes effect through a restart, as an
// install's change does (kustomize's hashed ConfigMap name and the chart's checksum
// annotation roll the pods). Rebuilding informers, workers and the prober in place would
// only redo what a start does. The file is polled (a mounted ConfigMap changes by a symlink
// swap, which inotify on the file does not see) and checked as --check-config checks it:
//
//   - invalid or unreadable: the running config stays; logged once ("The config file is
//     invalid"), depwatch_coordinator_config_valid 0 and /readyz failing with the problems
//     until the file is fixed;
//   - valid and the same as the running config (comments, order, "5m" and "300s" do not
//     count): nothing to do;
//   - valid and changed: logged, and the coordinator stops as on SIGTERM (the Lease released,
//     exit 0), so that its Deployment starts it again with the file while a standby takes
//     the lead.

import (
	"context"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/depwatch/depwatch/coordinator/config"
)

// DefaultConfigReloadInterval is how often the config file is read again.
const DefaultConfigReloadInterval = 10 * time.Second

// watchConfig checks the config file every interval until ctx ends, or until it holds a
// valid change: then it calls restart, which stops the coordinator and ends ctx.
func (c *Coordinator) watchConfig(ctx context.Context, every time.Duration, restart context.CancelFunc) {
	c.Log.WithFields(logrus.Fields{"configFile": c.Options.ConfigFile, "interval": every.String()}).
		Info("Watching the config file: a valid change restarts the coordinator to apply it; an invalid one is reported and changes nothing.")
	wait.UntilWithContext(ctx, func(context.Context) {
		if c.checkConfig() {
			restart() // ends ctx, and with it the watch
		}
	}, every)
}

// checkConfig reads the config files as --check-config does and reports whether they hold a
// valid config other than the running one: one that a restart applies. An invalid file keeps
// the running config and is reported once for each new set of problems.
func (c *Coordinator) checkConfig() bool {
	next, err := c.Options.LoadConfig()
	log := c.Log.WithField("configFile", c.Options.ConfigFile)
	var problems []string
	if err != nil {
		problems = Lines(err)
	}
	problem := strings.Join(problems, "\n")
	c.file.mu.Lock()
	was := c.file.problem
	if was == "" && problem != "" {
		c.file.since = c.Now()
	}
	c.file.problem = problem
	c.file.mu.Unlock()
	if err != nil {
		c.Metrics.ConfigValid.Set(0)
		if problem != was {
			log.WithField("errors", problems).
				Error("The config file is invalid: the coordinator keeps running with the config it started with; /readyz fails and depwatch_coordinator_config_valid is 0 until the file is fixed.")
		}
		return false
	}
	c.Metrics.ConfigValid.Set(1)
	changed := config.Changes(c.Config, next)
	if len(changed) == 0 {
		if was != "" {
			log.Info("The config file is valid again and the same as the running config: nothing to change.")
		}
		return false
	}
	log.WithField("changed", changed).
		Info("The config file changed and is valid: the coordinator stops to apply it; its Deployment starts it again with the file, and a standby leads meanwhile.")
	return true
}
