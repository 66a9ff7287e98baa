// Package examples holds no code: its test reads the example manifests as the coordinator
// reads the Jobs it finds.
package examples

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/depwatch/depwatch/jobs"
)

// exampleJobs are the Jobs of the example manifests that the coordinator counts (labelled
// with a depwatch kind), by file.
func exampleJobs(t *testing.T) map[string]batchv1.Job {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example manifests: %v", err)
	}
	out := map[string]batchv1.Job{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var j batchv1.Job
			err := dec.Decode(&j)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if j.Kind == "Job" && j.Labels[jobs.LabelKind] != "" {
				out[f] = j
			}
		}
	}
	return out
}

// A hand-run Job counts for the service it names only through what jobs.ReadFacts reads:
// the weeder's coverage of that service then includes it, armed or not as it says.
func TestHandRunJobsNameTheirTargetAsTheCoordinatorReadsIt(t *testing.T) {
	want := map[string]struct {
		covers []string
		armed  bool
	}{
		"weeder-job.yaml":       {[]string{"shoot--dev--my-cluster/etcd-main-client"}, false},
		"weeder-job-local.yaml": {[]string{"default/upstream"}, false},
	}
	found := exampleJobs(t)
	for file := range found {
		if _, ok := want[file]; !ok {
			t.Errorf("%s: a Job labelled %s that this test does not know: add what it covers", file, jobs.LabelKind)
		}
	}
	for file, w := range want {
		t.Run(file, func(t *testing.T) {
			j, ok := found[file]
			if !ok {
				t.Fatalf("no Job labelled %s in %s", jobs.LabelKind, file)
			}
			if got := jobs.ReadFacts(&j).Covers(); !slices.Equal(got, w.covers) {
				t.Errorf("covers %q, want %q", got, w.covers)
			}
			if got := jobs.Armed(&j); got != w.armed {
				t.Errorf("armed %v, want %v", got, w.armed)
			}
			if got := j.Labels[jobs.LabelNamespace] + "/" + j.Labels[jobs.LabelService]; got != w.covers[0] {
				t.Errorf("its labels say %s, its target %s: the coordinator's lists by label would miss it", got, w.covers[0])
			}
		})
	}
}
