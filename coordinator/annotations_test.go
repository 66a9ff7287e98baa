package coordinator

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/rights"
)

// A config that names no service runs a weeder that follows workloads' depends-on annotations
// alone; where the service account may not read workloads, such a config has nothing to run
// and the coordinator refuses to start, saying why.
func TestAConfigWithoutServicesWeedsByAnnotationsWhereWorkloadsMayBeRead(t *testing.T) {
	cfg, err := config.Parse([]byte("watchDuration: 5m\n"))
	if err != nil {
		t.Fatalf("a config that names no service, the annotation on by default: %v", err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	for _, tc := range []struct {
		name    string
		rights  rights.Rights
		refused string // "" : starts with a weeder
	}{
		{"depwatch's own rights", rights.All(), ""},
		{"no right to read workloads", func() rights.Rights { r := rights.All(); r.Workloads = false; return r }(), "may not list and watch Deployments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Deps{Shared: ctrl.Shared{Client: fake.NewClientset(), Log: log}, Config: cfg, Rights: &tc.rights})
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused == "" && c.weeder == nil:
				t.Fatal("no weeder: the annotations are not followed")
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("error %v, want one saying %q", err, tc.refused)
			}
		})
	}
}

// The weeder and the prober read one namespace informer (ctrl.Namespaces), which the
// coordinator runs once: a second would keep every namespace of a seed twice and watch it
// twice.
func TestTheWeederAndTheProberShareOneNamespaceInformer(t *testing.T) {
	cfg, err := config.Parse([]byte(`services:
  - namespace: shoot--a
    name: kube-apiserver
    dependentPods: [{name: kcm, selector: {matchLabels: {app: kcm}}}]
prober:
  kubeConfigSecretName: shoot-access
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      scaleUp: {level: 0}
      scaleDown: {level: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	c, err := New(Deps{Shared: ctrl.Shared{Client: fake.NewClientset(), Log: log}, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if c.weeder == nil || c.prober == nil {
		t.Fatal("want both controllers")
	}
	w, p, all := c.weeder.Informers(), c.prober.Informers(), c.informers()
	shared := 0
	for _, inf := range p {
		if slices.Contains(w, inf) {
			shared++
		}
	}
	if shared != 1 || len(all) != len(w)+len(p)-1 {
		t.Errorf("%d informers shared, %d run of %d+%d; want the namespace informer shared and run once", shared, len(all), len(w), len(p))
	}
}
