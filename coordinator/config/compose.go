package config

import (
	"encoding/json"
	"errors"
	"fmt"
)

// FlagError names the flag and its value in err; nil when err is.
func FlagError(flag, value string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s=%q: %w", flag, value, err)
}

// ComposeProber puts dependency-watchdog's prober config (YAML or JSON, top level as in
// its ConfigMap; from the file proberFlag names) into the config as its prober section, and
// returns the result as JSON. A config that has a prober section of its own is refused: two
// sources for one section would leave the reader guessing which applies.
func ComposeProber(config, proberConfig []byte, proberFlag, proberFile string) ([]byte, error) {
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
		return nil, FlagError(proberFlag, proberFile, err)
	}
	if top == nil {
		top = map[string]any{}
	}
	top["prober"] = prober
	return json.Marshal(top)
}
