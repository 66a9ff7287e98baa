// Command benchreap fills a namespace of the local cluster with API-only pods for the reaper's
// side-by-side benchmark (hack/bench-reap.sh), and removes them again.
//
//	benchreap populate -namespace NS -pods 10000 -match-every 10
//	benchreap cleanup  -namespace NS
//
// The pods are never run: their schedulerName names no scheduler, so they stay unbound and
// Pending; no kubelet starts them and no controller deletes them. (A spec.nodeName naming a node
// that does not exist would not do: kube-controller-manager's pod garbage collector deletes pods
// bound to a missing node after about 40 s.) Each pod has the shape of a control-plane pod
// (labels, annotations, an owner, two containers with env, probes, resources and mounts,
// volumes) and a written status: every match-every-th pod has a container waiting in
// CrashLoopBackOff, the others run; every pod started more than an hour ago.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "populate" && os.Args[1] != "cleanup") {
		fmt.Fprintln(os.Stderr, "usage: benchreap populate|cleanup -namespace NS [-pods N] [-match-every K] [-workers W]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	ns := fs.String("namespace", "", "dedicated namespace (created by populate, deleted by cleanup)")
	pods := fs.Int("pods", 10000, "pods to create")
	every := fs.Int("match-every", 10, "every K-th pod has a container in CrashLoopBackOff")
	workers := fs.Int("workers", 32, "parallel create calls")
	_ = fs.Parse(os.Args[2:])
	if *ns == "" || *pods < 1 || *every < 1 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "benchreap: -namespace must be set; -pods, -match-every and -workers must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreap: load kubeconfig:", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = 2000, 2000 // the local API server; creates are the whole point
	cfg.ContentType = runtime.ContentTypeProtobuf
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreap: client:", err)
		os.Exit(1)
	}
	if os.Args[1] == "populate" {
		err = populate(ctx, client, *ns, *pods, *every, *workers)
	} else {
		err = cleanup(ctx, client, *ns)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreap:", err)
		os.Exit(1)
	}
}

func populate(ctx context.Context, client kubernetes.Interface, ns string, n, every, workers int) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	// The namespace's default ServiceAccount must exist before pods name it (admission).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("wait for the default ServiceAccount in %s: %w", ns, err)
	}
	start := time.Now()
	var done atomic.Int64
	idx := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := createPod(ctx, client, ns, i, every); err != nil {
					errs <- err
					return
				}
				if d := done.Add(1); d%1000 == 0 {
					fmt.Printf("benchreap: %d pods in %s\n", d, time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	var firstErr error
feed:
	for i := 0; i < n; i++ {
		select {
		case idx <- i:
		case firstErr = <-errs:
			break feed
		case <-ctx.Done():
			firstErr = ctx.Err()
			break feed
		}
	}
	close(idx)
	wg.Wait()
	close(errs)
	if firstErr == nil {
		firstErr = <-errs
	}
	if firstErr != nil {
		return firstErr
	}
	fmt.Printf("benchreap: %d pods created in namespace %s in %s (%d with a container in CrashLoopBackOff)\n",
		n, ns, time.Since(start).Round(time.Second), (n+every-1)/every)
	return nil
}

// createPod creates pod i and writes its status; an existing pod (a re-run) is kept.
func createPod(ctx context.Context, client kubernetes.Interface, ns string, i, every int) error {
	pod := benchPod(ns, i, every)
	status := pod.Status
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", ns, pod.Name, err)
	}
	created.Status = status
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("write the status of pod %s/%s: %w", ns, pod.Name, err)
	}
	return nil
}

func cleanup(ctx context.Context, client kubernetes.Interface, ns string) error {
	// Pods first, in one call: the namespace controller would otherwise delete them one by one.
	zero := int64(0)
	err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the pods of namespace %s: %w", ns, err)
	}
	err = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("wait for namespace %s to be gone: %w", ns, errors.Join(err, ctx.Err()))
	}
	fmt.Printf("benchreap: namespace %s deleted\n", ns)
	return nil
}

// benchPod has the shape of reaper/wire_bench_test.go's realisticPod (the same sizes), as the
// API server accepts it from a client: no managedFields of its own (the server writes two
// entries: the create and the status update), no owner reference (the garbage collector would
// delete a pod whose owner does not exist), and the status written separately.
func benchPod(ns string, i, every int) *corev1.Pod {
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
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "certs", MountPath: "/srv/certs"}},
		}
	}
	started := metav1.NewTime(time.Now().Add(-time.Hour - time.Duration(i)*time.Second).Truncate(time.Second))
	cs := func(name string, crashing bool) corev1.ContainerStatus {
		s := corev1.ContainerStatus{Name: name, Ready: !crashing, RestartCount: 1, Image: "registry.example.com/team/" + name, ImageID: "sha256:" + strings.Repeat("b", 64),
			ContainerID: "containerd://" + strings.Repeat("c", 64), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
		if crashing {
			s.RestartCount = 7
			s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}}
		}
		return s
	}
	crashing := i%every == 0
	ready := corev1.ConditionTrue
	if crashing {
		ready = corev1.ConditionFalse
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("kube-apiserver-7d9f8c6b5-%05d", i), Namespace: ns,
			Labels:      map[string]string{"app": "kubernetes", "role": "apiserver", "pod-template-hash": "7d9f8c6b5", "gardener.cloud/role": "controlplane"},
			Annotations: map[string]string{"checksum/config": strings.Repeat("d", 64), "checksum/secret": strings.Repeat("e", 64)},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("app"), container("sidecar")},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-certs"}}},
			},
			SchedulerName: "depwatch-bench-no-scheduler", RestartPolicy: corev1.RestartPolicyAlways,
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, StartTime: &started, PodIP: "10.1.2.3", HostIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: ready, LastTransitionTime: started},
				{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			},
			ContainerStatuses: []corev1.ContainerStatus{cs("app", crashing), cs("sidecar", false)},
		},
	}
}
