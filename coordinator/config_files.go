package coordinator

import (
	"errors"
	"os"
	"strings"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/roles"
)

// LoadConfig loads the config files the options name exactly as a start does, without
// contacting a cluster: the one reading of a start, of --check-config and of the config
// watch. It returns the config, with the flags that set a config field applied (applyTo),
// or every problem, one a line, each naming the file it is in, then the field or flag and
// the value.
func (o Options) LoadConfig() (*config.Config, error) {
	if o.ConfigFile == "" {
		return nil, errors.New("--config-file: required (a dependency-watchdog weeder config or depwatch's extension of it)")
	}
	data, err := o.configData()
	if err != nil {
		return nil, errors.New(strings.Join(Lines(err), "\n")) // names the flag and the path
	}
	cfg, err := config.Parse(data)
	if err == nil {
		err = o.commandProblem(cfg)
	}
	if err != nil {
		var problems []string
		for _, line := range Lines(err) {
			file := "--config-file=" + o.ConfigFile
			if o.ProberConfigFile != "" && strings.HasPrefix(line, "prober.") {
				// Its fields read as the prober section's: the path says prober.<field>.
				file = "--prober-config-file=" + o.ProberConfigFile
			}
			problems = append(problems, file+": "+line)
		}
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	o.applyTo(cfg)
	return cfg, nil
}

// commandProblem is what dependency-watchdog's weeder command refuses in a config its
// parser accepts: a prober section (dependency-watchdog's prober reads its own ConfigMap,
// with the prober command), and no service (depwatch's own coordinator may follow workloads'
// annotations alone).
func (o Options) commandProblem(cfg *config.Config) error {
	switch {
	case o.Role != roles.Weeder:
	case cfg.Prober != nil:
		return errors.New("prober: the weeder command runs no prober (dependency-watchdog's prober reads its own ConfigMap, with the prober command)")
	case len(cfg.Services()) == 0:
		return errors.New("servicesAndDependantSelectors: required: dependency-watchdog's weeder ConfigMap names at least one service")
	}
	return nil
}

// configData is what config.Parse reads: the config file, with dependency-watchdog's prober
// ConfigMap data as it is as its prober section: --prober-config-file's, so that the
// ConfigMap gardenlet writes can be mounted unchanged beside the weeder's, or, under
// dependency-watchdog's prober command, the config file itself.
func (o Options) configData() ([]byte, error) {
	var configDoc []byte
	proberFlag, proberFile := "--prober-config-file", o.ProberConfigFile
	if o.Role == roles.Prober {
		proberFlag, proberFile = "--config-file", o.ConfigFile
	} else {
		data, err := os.ReadFile(o.ConfigFile)
		if err != nil || proberFile == "" {
			return data, config.FlagError("--config-file", o.ConfigFile, err)
		}
		configDoc = data
	}
	data, err := os.ReadFile(proberFile)
	if err != nil {
		return nil, config.FlagError(proberFlag, proberFile, err)
	}
	return config.ComposeProber(configDoc, data, proberFlag, proberFile)
}

// applyTo sets cfg's fields that a flag or the command decides too: --use-endpoints turns
// useEndpoints on whatever the file says, and the command says when a service whose entry
// names no readyWhen counts as back (config.DefaultReadyWhen). The one place flag, command and
// config meet; a reload applies it again.
func (o Options) applyTo(cfg *config.Config) {
	cfg.UseEndpoints = cfg.UseEndpoints || o.UseEndpoints
	cfg.ReadyWhenDefault = config.DefaultReadyWhen(o.Role, cfg.UseEndpoints)
}

// UseEndpointsInstead switches o and cfg to v1 Endpoints, where this service account may
// read Endpoints but not EndpointSlices (dependency-watchdog's RBAC before EndpointSlices),
// and settles again what depends on it.
func (o *Options) UseEndpointsInstead(cfg *config.Config) {
	o.UseEndpoints = true
	o.applyTo(cfg)
}
