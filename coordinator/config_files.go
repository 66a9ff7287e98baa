package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/depwatch/depwatch/internal/podstate"
)

// LoadConfig reads and validates the config file alone (LoadConfigFiles without a prober file).
func LoadConfig(path string) (*Config, error) { return LoadConfigFiles(path, "") }

// LoadConfigFiles reads the config file and, when proberFile is set (--prober-config-file),
// dependency-watchdog's prober ConfigMap data as it is, which becomes the `prober:` section.
// So the prober ConfigMap gardenlet writes can be mounted unchanged beside the weeder's.
func LoadConfigFiles(configFile, proberFile string) (*Config, error) {
	if configFile == "" {
		return nil, errors.New("--config-file: required (a dependency-watchdog weeder config or depwatch's extension of it)")
	}
	data, err := readConfigFiles(configFile, proberFile)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	switch {
	case err != nil && proberFile == "":
		return nil, fmt.Errorf("config file %s:\n%w", configFile, err)
	case err != nil:
		return nil, fmt.Errorf("config files %s and %s (its fields as prober.*):\n%w", configFile, proberFile, err)
	}
	return cfg, nil
}

// LoadConfig loads the config files the options name (LoadConfigFiles) and applies the flags
// that set a config field too (applyTo), so that everything after reads the effective value
// from the config alone.
// dependency-watchdog's commands read their own ConfigMap as it is: the weeder's is the
// config's top level, the prober's becomes its prober section.
func (o Options) LoadConfig() (*Config, error) {
	var cfg *Config
	var err error
	switch o.Role {
	case RoleProber:
		cfg, err = loadProberConfigFile(o.ConfigFile)
	default:
		cfg, err = LoadConfigFiles(o.ConfigFile, o.ProberConfigFile)
	}
	if err != nil {
		return nil, err
	}
	if o.Role == RoleWeeder && cfg.Prober != nil {
		return nil, fmt.Errorf("config file %s:\nprober: the weeder command runs no prober (dependency-watchdog's prober reads its own ConfigMap, with the prober command)", o.ConfigFile)
	}
	// dependency-watchdog's weeder refuses a ConfigMap without services; so does its command
	// here (depwatch's own coordinator may follow workloads' annotations alone).
	if o.Role == RoleWeeder && len(cfg.Services()) == 0 {
		return nil, fmt.Errorf("config file %s:\nservicesAndDependantSelectors: required: dependency-watchdog's weeder ConfigMap names at least one service", o.ConfigFile)
	}
	o.applyTo(cfg)
	return cfg, nil
}

// loadProberConfigFile reads dependency-watchdog's prober ConfigMap data, the prober
// command's --config-file, as the config's prober section.
func loadProberConfigFile(path string) (*Config, error) {
	data, err := proberConfigData(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s (dependency-watchdog's prober config; its fields as prober.*):\n%w", path, err)
	}
	return cfg, nil
}

// proberConfigData is the prober command's config file as ParseConfig reads it: its content
// as the prober section of an otherwise empty config.
func proberConfigData(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("--config-file: required (dependency-watchdog's prober config)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config-file=%q: %w", path, err)
	}
	prober, err := decodeDoc(data, "prober")
	if err != nil {
		return nil, fmt.Errorf("--config-file=%q: %w", path, err)
	}
	if len(prober) == 0 {
		return nil, fmt.Errorf("--config-file=%q: empty: it must hold dependency-watchdog's prober config (kubeConfigSecretName, dependentResourceInfos, ...)", path)
	}
	return json.Marshal(map[string]any{"prober": prober})
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
func DefaultReadyWhen(role Role, useEndpoints bool) podstate.ReadyWhen {
	if role == RoleWeeder && !useEndpoints {
		return podstate.ReadyAll
	}
	return podstate.ReadyAny
}

// readConfigFiles returns what ParseConfig reads: the config file alone, or with proberFile's
// content as its prober section. A reload hashes this, so a change to either file is seen.
func readConfigFiles(configFile, proberFile string) ([]byte, error) {
	data, err := os.ReadFile(configFile)
	if err != nil {
		return nil, fmt.Errorf("--config-file=%q: %w", configFile, err)
	}
	if proberFile == "" {
		return data, nil
	}
	proberData, err := os.ReadFile(proberFile)
	if err != nil {
		return nil, fmt.Errorf("--prober-config-file=%q: %w", proberFile, err)
	}
	return ComposeProberConfig(data, proberData)
}

// ComposeProberConfig puts dependency-watchdog's prober config (YAML or JSON, top level as in
// its ConfigMap) into the config as its prober section, and returns the result as JSON. A
// config that has a prober section of its own is refused: two sources for one section would
// leave the reader guessing which applies.
func ComposeProberConfig(config, proberConfig []byte) ([]byte, error) {
	top, err := decodeDoc(config, "")
	if err != nil {
		return nil, fmt.Errorf("--config-file: %w", err)
	}
	if _, ok := top["prober"]; ok {
		return nil, errors.New("prober: given in --config-file and in --prober-config-file; keep one (the prober ConfigMap as it is in --prober-config-file, or the section in --config-file)")
	}
	prober, err := decodeDoc(proberConfig, "prober")
	if err != nil {
		return nil, fmt.Errorf("--prober-config-file: %w", err)
	}
	if len(prober) == 0 {
		return nil, errors.New("--prober-config-file: empty: it must hold dependency-watchdog's prober config (kubeConfigSecretName, dependentResourceInfos, ...)")
	}
	if top == nil {
		top = map[string]any{}
	}
	top["prober"] = prober
	return json.Marshal(top)
}
