package prober

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/internal/fieldpath"
	"github.com/depwatch/depwatch/test/upstream"
)

// Every field the prober reads from a Cluster is in the Cluster written from Gardener's own
// types (test/upstream, gardener v1.136.2): a field name Gardener does not have (such as
// status.isHibernated, where Gardener writes status.hibernated) would read as "absent" on
// every real seed. A field under an object's metadata is Kubernetes' ObjectMeta, checked
// against that type instead (the fixture shoot is not being deleted).
func TestEveryClusterFieldIsInGardenersCluster(t *testing.T) {
	fixture := upstream.Cluster().Object
	fields := ClusterFields.Fields()
	if len(fields) == 0 {
		t.Fatal("no Cluster fields declared")
	}
	for _, f := range fields {
		if f.In(fixture) || isObjectMetaField(f) {
			continue
		}
		t.Errorf("the prober reads %s, which a Cluster of gardener %s does not have", f, upstream.GardenerVersion)
	}
}

// isObjectMetaField: f is a field of some object's metadata (Kubernetes' ObjectMeta), by
// its JSON name in that type, and that metadata is in the fixture.
func isObjectMetaField(f *fieldpath.Field) bool {
	p := f.Path()
	i := slices.Index(p, "metadata")
	if f.List() != nil || i < 0 || i != len(p)-2 {
		return false
	}
	parent := fieldpath.Set{}
	if !parent.Field(p[:i+1]...).In(upstream.Cluster().Object) {
		return false
	}
	return slices.Contains(jsonNames(reflect.TypeFor[metav1.ObjectMeta]()), p[i+1])
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// The lastOperation values the decision compares with are Gardener's.
func TestLastOperationValuesAreGardeners(t *testing.T) {
	for _, typ := range []string{LastOperationCreate, LastOperationReconcile, LastOperationRestore, LastOperationMigrate} {
		if !slices.Contains(upstream.LastOperationTypes, typ) {
			t.Errorf("lastOperation.type %q is not one of gardener's %v", typ, upstream.LastOperationTypes)
		}
	}
	if !slices.Contains(upstream.LastOperationStates, LastOperationSucceeded) {
		t.Errorf("lastOperation.state %q is not one of gardener's %v", LastOperationSucceeded, upstream.LastOperationStates)
	}
}

// The fixture as written is an active shoot whose own settings the prober reads: the
// fields are not only present but read as Gardener means them.
func TestTheProberReadsGardenersClusterAsGardenerMeansIt(t *testing.T) {
	c := upstream.Cluster()
	if ok, why := ShouldProbe(c); !ok {
		t.Errorf("the fixture is an active shoot, yet not probed: %s", why)
	}
	s := ShootSettingsOf(c)
	if len(s.Problems) > 0 || s.NodeMonitorGrace.String() != "40s" || s.NodeConditionsJSON() != `{"pool-a":["KernelDeadlock","ReadonlyFilesystem","DiskPressure","NetworkUnavailable"]}` {
		t.Errorf("the fixture's settings read as %+v (%s)", s, s.NodeConditionsJSON())
	}
}
