package podstate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// vocabulary is what every string of a generated pod is drawn from: the values the kubelet
// and the API give the fields a crash-loop test could read (reasons, phases, policies) and a
// few container names, so random pods hit the decisive values and their names match.
var vocabulary = []string{"", "app", "init", "sidecar", "CrashLoopBackOff", "Error", "Completed",
	"OOMKilled", "ContainerCreating", "Evicted", "Always", "Never", "OnFailure",
	"Running", "Pending", "Succeeded", "Failed", "Unknown", "True", "False",
	"back-off 40s restarting failed container=app pod=p_ns(uid)"}

// pickFrom fills a string-kinded field from the vocabulary.
func pickFrom[T ~string](p *T, c randfill.Continue) { *p = T(vocabulary[c.Intn(len(vocabulary))]) }

// filler fills every field of a pod, so that Slim's copy differs from the full pod wherever
// Slim drops something: strings from the vocabulary, small numbers (restart counts and exit
// codes of -1, 0, 1 and 137), every pointer set or not.
func filler(f *randfill.Filler) *randfill.Filler {
	small := []int32{-1, 0, 1, 137}
	return f.NilChance(0.3).NumElements(0, 3).MaxDepth(12).Funcs(
		pickFrom[string], pickFrom[corev1.RestartPolicy], pickFrom[corev1.ContainerRestartPolicy],
		pickFrom[corev1.PodPhase], pickFrom[corev1.ConditionStatus], pickFrom[corev1.PodConditionType],
		func(n *int32, c randfill.Continue) { *n = small[c.Intn(len(small))] },
		// Types whose random bytes do not make a valid value: fixed values are enough, no
		// crash-loop test reads a quantity or a port.
		func(q *resource.Quantity, _ randfill.Continue) { *q = resource.MustParse("1") },
		func(v *intstr.IntOrString, _ randfill.Continue) { *v = intstr.FromInt32(1) },
	)
}

// sameCrashLoop fails the test when CrashLoopBackOff tells the full pod and its slim copy
// apart, and returns the full pod's answer.
func sameCrashLoop(t *testing.T, full *corev1.Pod) bool {
	t.Helper()
	fullReason, fullOK := CrashLoopBackOff(full)
	slimReason, slimOK := CrashLoopBackOff(Slim(full))
	if fullOK != slimOK || fullReason != slimReason {
		t.Fatalf("crash loop of the full pod %v (%q), of its slim copy %v (%q): CrashLoopBackOff reads a field Slim drops\npod: %+v",
			fullOK, fullReason, slimOK, slimReason, full)
	}
	fullBackOff, fullLooping := PodBackOff(full)
	slimBackOff, slimLooping := PodBackOff(Slim(full))
	if fullLooping != slimLooping || fullBackOff != slimBackOff {
		t.Fatalf("back-off of the full pod %+v, of its slim copy %+v: PodBackOff reads a field Slim drops\npod: %+v", fullBackOff, slimBackOff, full)
	}
	return fullOK
}

// TestSlimKeepsCrashLoop: on hundreds of pods with every field set, the slim copy is
// crash-looping exactly when the full pod is, for the same reason. A crash-loop test that
// starts to read a field Slim does not keep fails here, before the weeder's cache (which holds
// slim pods) disagrees with the weeder Job (which lists full ones).
func TestSlimKeepsCrashLoop(t *testing.T) {
	outcomes := map[bool]int{}
	for seed := range int64(500) {
		var pod corev1.Pod
		filler(randfill.NewWithSeed(seed)).Fill(&pod)
		outcomes[sameCrashLoop(t, &pod)]++
	}
	if outcomes[true] < 20 || outcomes[false] < 20 {
		t.Fatalf("generated pods crash-loop %d times and not %d times: too few of one to prove anything", outcomes[true], outcomes[false])
	}
}

// FuzzSlimKeepsCrashLoop is TestSlimKeepsCrashLoop driven by the fuzzer's bytes.
//
//	go test -run '^$' -fuzz FuzzSlimKeepsCrashLoop ./internal/podstate/
func FuzzSlimKeepsCrashLoop(f *testing.F) {
	f.Add([]byte("seed"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var pod corev1.Pod
		filler(randfill.NewFromGoFuzz(data)).Fill(&pod)
		sameCrashLoop(t, &pod)
	})
}

// TestTransformSlimsPodsAndPassesTheRest: an informer's transform keeps a pod's identity
// and drops what no decision reads; a tombstone passes as it is.
func TestTransformSlimsPodsAndPassesTheRest(t *testing.T) {
	var pod corev1.Pod
	filler(randfill.NewWithSeed(1).NilChance(0).NumElements(1, 1)).Fill(&pod)
	got, err := Transform(&pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := got.(*corev1.Pod)
	if slim.Name != pod.Name || slim.Namespace != pod.Namespace || slim.UID != pod.UID || slim.ResourceVersion != pod.ResourceVersion {
		t.Errorf("slim pod lost its identity: %+v", slim.ObjectMeta)
	}
	if slim.ManagedFields != nil || slim.Spec.Volumes != nil || slim.Spec.Containers[0].Env != nil || slim.Status.ContainerStatuses[0].Image != "" {
		t.Errorf("slim pod kept what no decision reads: %+v", slim)
	}
	if other, _ := Transform("tombstone"); other != "tombstone" {
		t.Errorf("Transform changed a non-pod: %v", other)
	}
}
