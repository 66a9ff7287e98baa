package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// LoadConfigFiles reads the config file and, when proberFile is set (--prober-config-file),
// dependency-watchdog's prober ConfigMap data as it is, which becomes the `prober:` section.
// So the prober ConfigMap gardenlet writes can be mounted unchanged beside the weeder's.
func LoadConfigFiles(configFile, proberFile string) (*Config, error) {
	if proberFile == "" {
		return LoadConfig(configFile)
	}
	if configFile == "" {
		return nil, errors.New("--config-file: required (a dependency-watchdog weeder config or depwatch's extension of it)")
	}
	data, err := readConfigFiles(configFile, proberFile)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config files %s and %s (its fields as prober.*):\n%w", configFile, proberFile, err)
	}
	return cfg, nil
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

// readConfig is readConfigFiles with the coordinator's own flags.
func (c *Coordinator) readConfig(configFile string) ([]byte, error) {
	return readConfigFiles(configFile, c.opts.ProberConfigFile)
}

// ComposeProberConfig puts dependency-watchdog's prober config (YAML or JSON, top level as in
// its ConfigMap) into the config as its prober section, and returns the result as JSON. A
// config that has a prober section of its own is refused: two sources for one section would
// leave the reader guessing which applies.
func ComposeProberConfig(config, proberConfig []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := yaml.Unmarshal(config, &top); err != nil {
		if lines := nonFinite(config); len(lines) > 0 {
			return nil, fmt.Errorf("--config-file: %s", strings.Join(lines, "; "))
		}
		return nil, fmt.Errorf("--config-file: not valid YAML: %w", err)
	}
	if _, ok := top["prober"]; ok {
		return nil, errors.New("prober: given in --config-file and in --prober-config-file; keep one (the prober ConfigMap as it is in --prober-config-file, or the section in --config-file)")
	}
	var prober map[string]json.RawMessage
	if err := yaml.Unmarshal(proberConfig, &prober); err != nil {
		if lines := nonFinite(proberConfig); len(lines) > 0 {
			return nil, fmt.Errorf("--prober-config-file: prober.%s", strings.Join(lines, "; prober."))
		}
		return nil, fmt.Errorf("--prober-config-file: not valid YAML: %w", err)
	}
	if len(prober) == 0 {
		return nil, errors.New("--prober-config-file: empty: it must hold dependency-watchdog's prober config (kubeConfigSecretName, dependentResourceInfos, ...)")
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	raw, err := json.Marshal(prober)
	if err != nil {
		return nil, fmt.Errorf("--prober-config-file: %w", err)
	}
	top["prober"] = raw
	return json.Marshal(top)
}
