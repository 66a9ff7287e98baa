package prober

import (
	"encoding/json"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// finishedProbePod is a probe pod of a shard's Job that ended at rep.End with rep as its
// report (termination message).
func finishedProbePod(name string, rep probe.Report) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: map[string]string{jobs.LabelNamespace: "shard-0-000000"}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: string(jobs.KindProbe), State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Time{Time: rep.End}, Message: probe.EncodeReport(rep)}}}}}}
}
