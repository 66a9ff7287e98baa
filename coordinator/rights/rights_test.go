package rights

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/jobs"
)

// TestChooseExecutor is the whole choice: command × what the SelfSubjectAccessReview said ×
// --executor.
func TestChooseExecutor(t *testing.T) {
	cases := []struct {
		role    roles.Role
		choice  ExecutorChoice
		canJobs bool
		want    jobs.ExecutorKind
		why     string
	}{
		{roles.Coordinator, ExecutorChoiceJob, true, jobs.ExecutorJob, "--executor=job"},
		{roles.Coordinator, ExecutorChoiceJob, false, jobs.ExecutorJob, "--executor=job"}, // asked for: the rights do not change it
		{roles.Coordinator, "", false, jobs.ExecutorJob, "--executor=job"},
		{roles.Coordinator, ExecutorChoiceInProcess, true, jobs.ExecutorInProcess, "--executor=in-process"},
		{roles.Coordinator, ExecutorChoiceInProcess, false, jobs.ExecutorInProcess, "--executor=in-process"},
		{roles.Coordinator, ExecutorChoiceAuto, true, jobs.ExecutorJob, "may create Jobs"},
		{roles.Coordinator, ExecutorChoiceAuto, false, jobs.ExecutorInProcess, "may not create Jobs"},
		{roles.Weeder, ExecutorChoiceAuto, false, jobs.ExecutorInProcess, "gardenlet's RBAC"},
		{roles.Weeder, ExecutorChoiceAuto, true, jobs.ExecutorJob, "depwatch's own RBAC"},
		{roles.Prober, ExecutorChoiceAuto, false, jobs.ExecutorInProcess, "gardenlet's RBAC"},
		{roles.Prober, ExecutorChoiceAuto, true, jobs.ExecutorJob, "depwatch's own RBAC"},
		{roles.Prober, ExecutorChoiceJob, false, jobs.ExecutorInProcess, "prober command"}, // the commands always decide by the rights
	}
	for _, tc := range cases {
		got, why := ChooseExecutor(tc.role, tc.choice, tc.canJobs, "garden")
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s %q jobs=%v: %s (%s), want %s (%s)", tc.role.Command(), tc.choice, tc.canJobs, got, why, tc.want, tc.why)
		}
	}
}

// grants answers SelfSubjectAccessReviews from a table of "verb group/resource" (namespace
// "" for every one).
func grants(allowed ...string) *fake.Clientset {
	client := fake.NewClientset()
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		res := ra.Resource
		if ra.Subresource != "" {
			res += "/" + ra.Subresource
		}
		q := ra.Verb + " " + ra.Group + "/" + res
		if ra.Namespace != "" {
			q += " in " + ra.Namespace
		}
		out := r.DeepCopy()
		for _, g := range allowed {
			if g == q {
				out.Status.Allowed = true
			}
		}
		return true, out, nil
	})
	return client
}

// The ClusterRoles gardenlet gives dependency-watchdog (gardener v1.149.3,
// bootstrap.go getClusterRolePolicyRules), as the reviews ask about them; the Role in garden
// (Lease, Events) answers no review asked in every namespace.
var (
	gardenletWeederGrants = []string{"get /pods", "list /pods", "watch /pods", "delete /pods",
		"get discovery.k8s.io/endpointslices", "list discovery.k8s.io/endpointslices", "watch discovery.k8s.io/endpointslices"}
	gardenletProberGrants = []string{"get extensions.gardener.cloud/clusters", "list extensions.gardener.cloud/clusters",
		"get /namespaces", "list /namespaces", "watch /namespaces", "get /secrets", "list /secrets", "watch /secrets",
		"get apps/deployments", "update apps/deployments", "patch apps/deployments",
		"get apps/deployments/scale", "update apps/deployments/scale", "patch apps/deployments/scale"}
)

func TestCheckRightsUnderGardenletsRBAC(t *testing.T) {
	w := Check(context.Background(), grants(gardenletWeederGrants...), "garden")
	if w.CreateJobs || w.Events || w.Namespaces || w.Services || !w.Slices || w.Endpoints || !w.DeletePods || len(w.Unknown) > 0 {
		t.Errorf("weeder: %+v", w)
	}
	p := Check(context.Background(), grants(gardenletProberGrants...), "garden")
	if p.CreateJobs || p.Events || !p.Namespaces || !p.ScaleWorkloads || !p.ReadSecrets || p.DeletePods {
		t.Errorf("prober: %+v", p)
	}
	own := Check(context.Background(), grants("create batch/jobs in depwatch", "create /events", "list /namespaces", "watch /namespaces"), "depwatch")
	if !own.CreateJobs || !own.Events || !own.Namespaces {
		t.Errorf("depwatch's coordinator: %+v", own)
	}
	if w.Workloads || p.Workloads { // deployments alone, or none: all three kinds must be readable
		t.Errorf("workloads readable: weeder %v, prober %v", w.Workloads, p.Workloads)
	}
	all := Check(context.Background(), grants("list apps/deployments", "watch apps/deployments", "list apps/statefulsets",
		"watch apps/statefulsets", "list apps/daemonsets", "watch apps/daemonsets"), "depwatch")
	if !all.Workloads {
		t.Errorf("list and watch of all three workload kinds: %+v", all)
	}
	if k, _ := ChooseExecutor(roles.Weeder, ExecutorChoiceAuto, w.CreateJobs, "garden"); k != jobs.ExecutorInProcess {
		t.Errorf("gardenlet's weeder runs as %s", k)
	}
}

func TestCheckRightsCountsAReviewThatFailsAsDenied(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	r := Check(context.Background(), client, "garden")
	if r.CreateJobs || !r.Unreachable() || !strings.Contains(strings.Join(r.Unknown, "\n"), "create batch jobs in namespace garden") {
		t.Errorf("%+v unreachable=%v", r, r.Unreachable())
	}
	if All().Unreachable() {
		t.Error("rights.All counts as unreachable")
	}
}

// TestWithoutEventRightsOnlyTheLeasesNamespaceGetsEvents: the recorder keeps the Events
// gardenlet's Role allows (in garden, the Lease's) and drops the rest without a request.
func TestWithoutEventRightsOnlyTheLeasesNamespaceGetsEvents(t *testing.T) {
	fr := record.NewFakeRecorder(10)
	r := InNamespace(fr, "garden")
	r.Event(&corev1.ObjectReference{Kind: "Service", Namespace: "shoot--a", Name: "etcd-main-client"}, corev1.EventTypeNormal, "WeederArmed", "x")
	r.Eventf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--a", Name: "p"}}, corev1.EventTypeNormal, "Reaped", "%s", "x")
	r.Event(&corev1.ObjectReference{Kind: "Lease", Namespace: "garden", Name: roles.WeederLeaseName}, corev1.EventTypeNormal, "LeaderElection", "became leader")
	r.AnnotatedEventf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "c"}}, nil, corev1.EventTypeNormal, "X", "y")
	close(fr.Events)
	var got []string
	for e := range fr.Events {
		got = append(got, e)
	}
	if len(got) != 2 || !strings.Contains(got[0], "LeaderElection") {
		t.Errorf("recorded %v, want the two in garden", got)
	}
}

// Check starts from All and lets each review take a right away: a right that
// All leaves out would read as denied whatever the API server says.
func TestAllRightsGrantsEveryRight(t *testing.T) {
	r := reflect.ValueOf(All())
	for i := range r.NumField() {
		if f := r.Field(i); f.Kind() == reflect.Bool && !f.Bool() {
			t.Errorf("rights.All leaves %s out", r.Type().Field(i).Name)
		}
	}
}
