package prober

import (
	"encoding/json"
	"errors"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// file is a config file as far as the prober reads it: its prober section.
type file struct{ Prober *Config }

// parseFile reads the prober section of a config file (YAML) the way the coordinator hands it
// over, with every problem on its own line; the file's other sections are the coordinator's.
func parseFile(data []byte) (*file, error) {
	var top map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	raw, ok := top["prober"]
	if !ok {
		return nil, errors.New("no prober section")
	}
	cfg, errs := Parse(raw)
	if len(errs) > 0 {
		lines := make([]string, 0, len(errs))
		for _, e := range errs {
			lines = append(lines, e.Error())
		}
		return nil, errors.New(strings.Join(lines, "\n"))
	}
	return &file{Prober: cfg}, nil
}

func newTestMetrics() *Metrics { return NewMetrics(ctrl.NewJobMetrics()) }

// finishedProbeRun is a probe run of a shard that ended at rep.End with rep as its
// report.
func finishedProbeRun(name string, rep probe.Report) jobs.Report {
	return jobs.Report{Run: "depwatch/" + name, FinishedAt: rep.End, Message: probe.EncodeReport(rep)}
}
