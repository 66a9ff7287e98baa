package reaper

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// realisticPod is a pod as a control-plane namespace holds them: labels, annotations, an
// owner, the managedFields of three managers, two containers with env, probes, resources and
// mounts, volumes, and a full status.
func realisticPod(i int) *corev1.Pod {
	env := make([]corev1.EnvVar, 10)
	for j := range env {
		env[j] = corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d-for-this-setting", j)}
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "registry.example.com/team/" + name + "@sha256:" + strings.Repeat("a", 64),
			Args: []string{"--config=/etc/app/config.yaml", "--v=2", "--secure-port=8443"}, Env: env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			LivenessProbe: probe, ReadinessProbe: probe,
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "certs", MountPath: "/srv/certs"}, {Name: "token", MountPath: "/var/run/secrets/token"}},
		}
	}
	managed := func(manager string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{},"f:image":{},"f:resources":{}}}},"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:podIP":{}}}`)}}
	}
	started := metav1.NewTime(t0.Add(-time.Duration(i) * time.Minute))
	cs := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Ready: true, RestartCount: 1, Image: "registry.example.com/team/" + name, ImageID: "sha256:" + strings.Repeat("b", 64),
			ContainerID: "containerd://" + strings.Repeat("c", 64), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("kube-apiserver-7d9f8c6b5-%05d", i), Namespace: "shoot--team--cluster", UID: "0a1b2c3d-4e5f-6789-abcd-ef0123456789",
			ResourceVersion: "123456789", CreationTimestamp: started,
			Labels:          map[string]string{"app": "kubernetes", "role": "apiserver", "pod-template-hash": "7d9f8c6b5", "gardener.cloud/role": "controlplane"},
			Annotations:     map[string]string{"checksum/config": strings.Repeat("d", 64), "checksum/secret": strings.Repeat("e", 64)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "kube-apiserver-7d9f8c6b5", UID: "rs-uid", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{managed("kube-controller-manager"), managed("kubelet"), managed("gardenlet")},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("app"), container("sidecar")},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-certs"}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
			},
			NodeName: "node-1", ServiceAccountName: "kube-apiserver", RestartPolicy: corev1.RestartPolicyAlways,
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, StartTime: &started, PodIP: "10.1.2.3", HostIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			},
			ContainerStatuses: []corev1.ContainerStatus{cs("app"), cs("sidecar")},
		},
	}
}

func podPage() *corev1.PodList {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "1", Continue: "token"}}
	for i := 0; i < pageSize; i++ {
		list.Items = append(list.Items, *realisticPod(i))
	}
	return list
}

// BenchmarkPodPageDecode measures what one list page of 500 realistic pods costs the reaper
// as JSON (client-go's default) and as protobuf (what depwatch reap's typed client asks for):
// bytes on the wire per page and the time and allocations to decode it.
//
//	go test -run '^$' -bench BenchmarkPodPageDecode -benchmem ./reaper/
func BenchmarkPodPageDecode(b *testing.B) {
	page := podPage()
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		data := encodeAs(b, page, mediaType)
		dec := scheme.Codecs.UniversalDeserializer()
		b.Run(strings.TrimPrefix(mediaType, "application/"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _, err := dec.Decode(data, nil, &corev1.PodList{})
				if err != nil || len(obj.(*corev1.PodList).Items) != pageSize {
					b.Fatalf("decode: %v", err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/page") // after the loop, which resets metrics
		})
	}
}

// BenchmarkKeptPod measures what a kept pod (a cycle's match, a WATCH cache entry) weighs, as
// its protobuf size: the full object against slimPod's copy.
//
//	go test -run '^$' -bench BenchmarkKeptPod -benchmem ./reaper/
func BenchmarkKeptPod(b *testing.B) {
	full := realisticPod(1)
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			_ = full.DeepCopy()
		}
		b.ReportMetric(float64(full.Size()), "bytes/pod")
	})
	b.Run("slim", func(b *testing.B) {
		for b.Loop() {
			_ = slimPod(full)
		}
		b.ReportMetric(float64(slimPod(full).Size()), "bytes/pod")
	})
}
