package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/internal/podstate"
)

// LoadConfig loads the config files the options name exactly as a start does, without
// contacting a cluster: the one reading of a start, of --check-config and of the config
// watch. It returns the config, with the flags that set a config field applied (applyTo),
// or every problem, one a line, each naming the file it is in, then the field or flag and
// the value.
func (o Options) LoadConfig() (*Config, error) {
	if o.ConfigFile == "" {
		return nil, errors.New("--config-file: required (a dependency-watchdog weeder config or depwatch's extension of it)")
	}
	data, err := o.configData()
	if err != nil {
		return nil, errors.New(strings.Join(Lines(err), "\n")) // names the flag and the path
	}
	cfg, err := ParseConfig(data)
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
func (o Options) commandProblem(cfg *Config) error {
	switch {
	case o.Role != roles.Weeder:
	case cfg.Prober != nil:
		return errors.New("prober: the weeder command runs no prober (dependency-watchdog's prober reads its own ConfigMap, with the prober command)")
	case len(cfg.Services()) == 0:
		return errors.New("servicesAndDependantSelectors: required: dependency-watchdog's weeder ConfigMap names at least one service")
	}
	return nil
}

// configData is what ParseConfig reads: the config file, with dependency-watchdog's prober
// ConfigMap data as it is as its prober section: --prober-config-file's, so that the
// ConfigMap gardenlet writes can be mounted unchanged beside the weeder's, or, under
// dependency-watchdog's prober command, the config file itself.
func (o Options) configData() ([]byte, error) {
	var config []byte
	proberFlag, proberFile := "--prober-config-file", o.ProberConfigFile
	if o.Role == roles.Prober {
		proberFlag, proberFile = "--config-file", o.ConfigFile
	} else {
		data, err := os.ReadFile(o.ConfigFile)
		if err != nil || proberFile == "" {
			return data, flagError("--config-file", o.ConfigFile, err)
		}
		config = data
	}
	data, err := os.ReadFile(proberFile)
	if err != nil {
		return nil, flagError(proberFlag, proberFile, err)
	}
	return composeProberConfig(config, data, proberFlag, proberFile)
}

func flagError(flag, value string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s=%q: %w", flag, value, err)
}

// composeProberConfig puts dependency-watchdog's prober config (YAML or JSON, top level as in
// its ConfigMap; from the file proberFlag names) into the config as its prober section, and
// returns the result as JSON. A config that has a prober section of its own is refused: two
// sources for one section would leave the reader guessing which applies.
func composeProberConfig(config, proberConfig []byte, proberFlag, proberFile string) ([]byte, error) {
	top, err := decodeDoc(config, "")
	if err != nil {
		return nil, fmt.Errorf("--config-file: %w", err)
	}
	if _, ok := top["prober"]; ok {
		return nil, errors.New("prober: given in --config-file and in --prober-config-file; keep one (the prober ConfigMap as it is in --prober-config-file, or the section in --config-file)")
	}
	prober, err := decodeDoc(proberConfig, "prober")
	if err == nil && len(prober) == 0 {
		err = errors.New("empty: it must hold dependency-watchdog's prober config (kubeConfigSecretName, dependentResourceInfos, ...)")
	}
	if err != nil {
		return nil, flagError(proberFlag, proberFile, err)
	}
	if top == nil {
		top = map[string]any{}
	}
	top["prober"] = prober
	return json.Marshal(top)
}

// applyTo sets cfg's fields that a flag or the command decides too: --use-endpoints turns
// useEndpoints on whatever the file says, and the command says when a service whose entry
// names no readyWhen counts as back (DefaultReadyWhen). The one place flag, command and
// config meet; a reload applies it again.
func (o Options) applyTo(cfg *Config) {
	cfg.UseEndpoints = cfg.UseEndpoints || o.UseEndpoints
	cfg.ReadyWhenDefault = DefaultReadyWhen(o.Role, cfg.UseEndpoints)
}

// UseEndpointsInstead switches o and cfg to v1 Endpoints, where this service account may
// read Endpoints but not EndpointSlices (dependency-watchdog's RBAC before EndpointSlices),
// and settles again what depends on it.
func (o *Options) UseEndpointsInstead(cfg *Config) {
	o.UseEndpoints = true
	o.applyTo(cfg)
}

// DefaultReadyWhen is when a service whose entry names no readyWhen counts as back:
//
//   - under dependency-watchdog's weeder command, as dependency-watchdog decides it, since
//     gardenlet owns the ConfigMap and nothing there can say otherwise: on EndpointSlices
//     (dependency-watchdog v1.6+, which gardenlet grants EndpointSlices) when every endpoint
//     is ready; on v1 Endpoints (dependency-watchdog up to v1.5, whose RBAC granted Endpoints
//     only) when one address is ready, which is all Endpoints can tell apart here;
//   - under depwatch's own coordinator, one ready endpoint (podstate.ReadyAny): a dependent
//     that crash-loops because it cannot reach its service can reach it again as soon as one
//     endpoint serves, and a three-member etcd serves with two. A service that needs more
//     says so in its entry (readyWhen: all, or a count).
func DefaultReadyWhen(role roles.Role, useEndpoints bool) podstate.ReadyWhen {
	if role == roles.Weeder && !useEndpoints {
		return podstate.ReadyAll
	}
	return podstate.ReadyAny
}
