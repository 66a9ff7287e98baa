//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// dryRun creates nothing: admission runs in full, the object is not stored. The refused and
// the admitted cases alike, so no Job of this test ever runs beside the suite's.
var dryRun = []string{metav1.DryRunAll}

// An admission case: one request, made in depwatch's namespace, where the lab's policy binds,
// and in a control namespace where nothing binds it, with the same rights.
type admissionCase struct {
	name string
	// as: the coordinator's token, or the admin's (what a user who may create pods does)
	as func(c clients) kubernetes.Interface
	// do makes the request (a dry run) in namespace ns
	do func(t *testing.T, c kubernetes.Interface, ns string) error
	// refusal is what the policy's message must say in depwatch's namespace
	refusal string
}

type clients struct{ coordinator, admin kubernetes.Interface }

func asCoordinator(c clients) kubernetes.Interface { return c.coordinator }
func asAdmin(c clients) kubernetes.Interface       { return c.admin }

// TestSecurityAdmissionPolicyRefusesWhatIsNotDepwatchsJob: with a token of the coordinator's
// service account, as a thief would use it, Jobs that run as depwatch-probe or depwatch-weeder
// but are not depwatch's are refused in depwatch's namespace, each with a message that names
// what was refused and why: another image; depwatch's image with the command sh, or with
// arguments other than its subcommand; a weeder whose reap run is not limited to crash-looping
// pods; an extra volume; a hostPath; a privileged container; an
// init container; the host's PID namespace; a Job under another service account. So are a bare
// pod as depwatch-weeder created by the admin (whoever creates it), a hand-made Job from
// examples/ with an image other than the installed one, and the coordinator's update or delete
// of its own config ConfigMap. Every one of these is admitted in a control namespace where the
// coordinator has the same rights and no policy binds, so the refusals are the policy's. The
// Jobs exactly as the coordinator builds them, the pods the Job controller makes of them, the
// hand-made example for this cluster and a probe shard's membership ConfigMap are admitted in
// depwatch's namespace. All requests are server-side dry runs: the lab's policy stays in place
// for the tests running beside this one, and nothing is created.
func TestSecurityAdmissionPolicyRefusesWhatIsNotDepwatchsJob(t *testing.T) {
	parallel(t)
	ensureCoordinator(t)
	ctx := context.Background()
	c := clients{coordinator: serviceAccountClient(t, depwatchNS, "depwatch-coordinator"), admin: kube}
	control := newNamespace(t, "sec-vap-control")
	grantLikeDepwatch(t, control)

	tpl := localJobTemplate(t)
	weeder, probeJob := coordinatorJobs(t, tpl)
	config := lab.configMapName(t)
	// The coordinator's config in the control namespace, as in depwatch's.
	labCM, err := kube.CoreV1().ConfigMaps(depwatchNS).Get(ctx, config, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controlCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config, Namespace: control, Labels: labCM.Labels}, Data: labCM.Data}
	if _, err := kube.CoreV1().ConfigMaps(control).Create(ctx, controlCM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	job := func(base *batchv1.Job, edit func(*corev1.PodSpec)) func(*testing.T, kubernetes.Interface, string) error {
		return func(t *testing.T, k kubernetes.Interface, ns string) error {
			j := base.DeepCopy()
			j.Namespace = ns
			j.Name = dnsName("vap-" + j.Name)
			edit(&j.Spec.Template.Spec)
			_, err := k.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{DryRun: dryRun})
			return err
		}
	}
	mount := func(s *corev1.PodSpec, v corev1.Volume) {
		s.Volumes = append(s.Volumes, v)
		s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/mnt/" + v.Name})
	}
	refused := []admissionCase{
		{"job-with-another-image", asCoordinator, job(probeJob, func(s *corev1.PodSpec) { s.Containers[0].Image = testappImage }),
			"runs image " + testappImage + ", not depwatch's image " + depwatchImage},
		{"job-running-sh", asCoordinator, job(probeJob, func(s *corev1.PodSpec) { s.Containers[0].Command = []string{"sh"} }),
			"runs the command [sh], not depwatch's entrypoint [/depwatch]"},
		{"weeder-job-running-probe", asCoordinator, job(weeder, func(s *corev1.PodSpec) { s.Containers[0].Args = []string{"probe"} }),
			"runs with the arguments [probe], not `depwatch reap` alone"},
		{"probe-job-with-a-flag", asCoordinator, job(probeJob, func(s *corev1.PodSpec) { s.Containers[0].Args = []string{"probe", "--kubeconfig=/tmp/k"} }),
			"runs with the arguments [probe --kubeconfig=/tmp/k], not `depwatch probe` alone"},
		{"weeder-job-reaping-more-than-crash-loops", asCoordinator, job(weeder, func(s *corev1.PodSpec) {
			env := s.Containers[0].Env[:0]
			for _, e := range s.Containers[0].Env {
				if e.Value != reaper.ReasonCrashLoopBackOff {
					env = append(env, e)
				}
			}
			s.Containers[0].Env = append(env, corev1.EnvVar{Name: "MAX_DURATION", Value: "1s"}) // every pod older than a second
		}), "does not set CONTAINER_STATUSES=CrashLoopBackOff, with which depwatch's weeders restart crash-looping pods and no others"},
		{"job-with-an-extra-volume", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			mount(s, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}), "mounts the volumes scratch, while depwatch's Jobs mount nothing but their service account token"},
		{"job-with-a-hostpath", asCoordinator, job(weeder, func(s *corev1.PodSpec) {
			mount(s, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}), "mounts the volumes host"},
		{"privileged-job", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.Privileged = ptr.To(true)
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
		}), "runs a container privileged or with added capabilities"},
		{"job-with-an-init-container", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: depwatchImage, ImagePullPolicy: corev1.PullNever, Args: []string{"probe"}}}
		}), "has 1 containers, 1 init containers and 0 ephemeral containers"},
		{"job-in-the-hosts-pid-namespace", asCoordinator, job(weeder, func(s *corev1.PodSpec) { s.HostPID = true }),
			"uses the host's PID namespace"},
		{"job-without-depwatchs-labels", asCoordinator, func(t *testing.T, k kubernetes.Interface, ns string) error {
			j := probeJob.DeepCopy()
			j.Namespace, j.Name = ns, dnsName("vap-unlabelled")
			j.Spec.Template.Labels = map[string]string{"app": "probe"}
			_, err := k.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{DryRun: dryRun})
			return err
		}, "lacks the labels depwatch puts on its Jobs' pods: app.kubernetes.io/name=depwatch and app.kubernetes.io/component=probe"},
		{"job-under-another-service-account", asCoordinator, job(weeder, func(s *corev1.PodSpec) { s.ServiceAccountName = "default" }),
			"running as default, was launched by the coordinator, which launches only Jobs that run as depwatch-weeder or depwatch-probe"},
		{"bare-pod-as-the-weeder", asAdmin, func(t *testing.T, k kubernetes.Interface, ns string) error {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: dnsName("vap-bare"), Namespace: ns, Labels: weeder.Spec.Template.Labels},
				Spec: corev1.PodSpec{ServiceAccountName: "depwatch-weeder", RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "app", Image: testappImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/testapp", "sleep"}}}},
			}
			_, err := k.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: dryRun})
			return err
		}, ", running as depwatch-weeder, runs image " + testappImage},
		{"hand-made-weeder-with-the-release-image", asAdmin, func(t *testing.T, k kubernetes.Interface, ns string) error {
			return kubectlDryRun(t, ns, "weeder-job.yaml")
		}, "runs image ghcr.io/depwatch/depwatch:"},
		// What a Job admitted by the earlier rules could still do with its token (docs/security.md's
		// threat table): each refused by a rule of its own.
		{"job-with-a-kubeconfig-in-env", asCoordinator, job(probeJob, func(s *corev1.PodSpec) { setEnv(s, "KUBECONFIG", "/tmp/k") }),
			"sets the environment variables KUBECONFIG, which are neither its run's"},
		{"job-with-another-home", asCoordinator, job(weeder, func(s *corev1.PodSpec) { setEnv(s, "HOME", "/tmp") }),
			"sets the environment variables HOME"},
		{"job-pointing-the-in-cluster-config-elsewhere", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			setEnv(s, "KUBERNETES_SERVICE_PORT", "16443") // the lab pins 127.0.0.1:6443
		}), "sets the environment variables KUBERNETES_SERVICE_PORT"},
		{"job-with-a-kubeconfig-from-an-annotation", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			mount(s, corev1.Volume{Name: "kube", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "config",
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['kubeconfig']"}}}}}}}}})
		}), "mounts the volumes kube,"},
		{"job-with-its-own-projection-at-the-token-path", asCoordinator, job(weeder, func(s *corev1.PodSpec) { ownTokenProjection(s) }),
			"mounts the volumes kube-api-access-own"},
		{"pod-with-its-own-projection-at-the-token-path", asAdmin, func(t *testing.T, k kubernetes.Interface, ns string) error {
			p := jobControllersPod(weeder)
			p.Namespace = ns
			ownTokenProjection(&p.Spec) // the ServiceAccount admission plugin adds no mount where one is
			_, err := k.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: dryRun})
			return err
		}, "mounts the volumes kube-api-access-own"},
		{"job-with-a-secret-in-env", asCoordinator, job(weeder, func(s *corev1.PodSpec) {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "DRY_RUN", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "shoot-kubeconfig"}, Key: "kubeconfig"}}})
		}), "sets the environment variables DRY_RUN"},
		{"job-with-env-from-a-secret", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shoot-kubeconfig"}}}}
		}), "takes environment variables from a Secret or ConfigMap (envFrom)"},
		{"job-with-a-poststart-hook", asCoordinator, job(weeder, func(s *corev1.PodSpec) {
			s.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/depwatch", "reap"}}}}
		}), "has a lifecycle hook or a probe"},
		{"job-with-an-exec-startup-probe", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			s.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/depwatch", "probe"}}}}
		}), "has a lifecycle hook or a probe"},
		{"job-with-host-aliases", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			s.HostAliases = []corev1.HostAlias{{IP: "127.0.0.2", Hostnames: []string{"kubernetes.default.svc"}}}
		}), "sets host aliases, a DNS configuration or a DNS policy other than ClusterFirst"},
		{"job-with-its-own-dns", asCoordinator, job(weeder, func(s *corev1.PodSpec) {
			s.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}}}
		}), "sets host aliases, a DNS configuration or a DNS policy other than ClusterFirst"},
		// depwatch's namespace in the lab enforces pod security "privileged" (for the host
		// network): the policy checks the security context itself.
		{"job-with-a-weakened-security-context", asCoordinator, job(weeder, func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
			s.Containers[0].SecurityContext.Capabilities = nil
		}), "does not run with depwatch's security context"},
		{"job-running-as-root", asCoordinator, job(probeJob, func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot, s.SecurityContext.RunAsUser = ptr.To(false), ptr.To(int64(0))
		}), "does not run with depwatch's security context"},
		{"job-retrying-for-ever", asCoordinator, func(t *testing.T, k kubernetes.Interface, ns string) error {
			j := weeder.DeepCopy()
			j.Namespace, j.Name = ns, dnsName("vap-ignore")
			j.Spec.PodFailurePolicy.Rules[0].Action = batchv1.PodFailurePolicyActionIgnore
			j.Spec.Parallelism = ptr.To(int32(10))
			_, err := k.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{DryRun: dryRun})
			return err
		}, "does not bound itself as depwatch's Jobs do"},
		{"coordinator-updates-its-config", asCoordinator, func(t *testing.T, k kubernetes.Interface, ns string) error {
			cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, config, metav1.GetOptions{}) // the coordinator may not get it
			if err != nil {
				t.Fatal(err)
			}
			cm.Data["config.yaml"] += "\narmWeeder: false\n"
			_, err = k.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{DryRun: dryRun})
			return err
		}, "refused: update of ConfigMap " + config + ", which is not one of them"},
		{"coordinator-deletes-its-config", asCoordinator, func(t *testing.T, k kubernetes.Interface, ns string) error {
			return k.CoreV1().ConfigMaps(ns).Delete(ctx, config, metav1.DeleteOptions{DryRun: dryRun})
		}, "refused: delete of ConfigMap " + config},
	}
	// The lab's policy is installed with the suite; wait until the API server applies it, with
	// its parameters (until they reach the policy every request is refused for their absence),
	// before any "admitted" or "refused" is trusted.
	waitFor(t, time.Minute, "the lab's admission policy to refuse a probe Job with another image", func() (bool, error) {
		err := refused[0].do(t, c.coordinator, depwatchNS)
		return err != nil && strings.Contains(err.Error(), refused[0].refusal), nil
	})
	for _, rc := range refused {
		t.Run("refused/"+rc.name, func(t *testing.T) {
			err := rc.do(t, rc.as(c), depwatchNS)
			switch {
			case err == nil:
				t.Fatalf("admitted in %s", depwatchNS)
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy"):
				t.Fatalf("refused, but not by an admission policy: %v", err)
			case !strings.Contains(err.Error(), rc.refusal):
				t.Errorf("refused without saying %q:\n%v", rc.refusal, err)
			default:
				t.Logf("refused: %v", err)
			}
			// Without the policy, the same request with the same rights is admitted.
			if err := rc.do(t, rc.as(c), control); err != nil {
				t.Errorf("admitted nowhere, not even in %s, where no policy binds: %v", control, err)
			}
		})
	}

	// What depwatch runs is admitted in its namespace.
	pod := func(j *batchv1.Job) func(*testing.T, kubernetes.Interface, string) error {
		return func(t *testing.T, k kubernetes.Interface, ns string) error {
			_, err := k.CoreV1().Pods(ns).Create(ctx, jobControllersPod(j), metav1.CreateOptions{DryRun: dryRun})
			return err
		}
	}
	admitted := []admissionCase{
		{"weeder-job", asCoordinator, job(weeder, func(*corev1.PodSpec) {}), ""},
		{"probe-job", asCoordinator, job(probeJob, func(*corev1.PodSpec) {}), ""},
		{"weeder-jobs-pod", asAdmin, pod(weeder), ""},
		{"probe-jobs-pod", asAdmin, pod(probeJob), ""},
		{"hand-made-weeder-for-this-cluster", asAdmin, func(t *testing.T, k kubernetes.Interface, ns string) error {
			return kubectlDryRun(t, ns, "weeder-job-local.yaml")
		}, ""},
		{"probe-shard-membership", asCoordinator, func(t *testing.T, k kubernetes.Interface, ns string) error {
			cm := tpl.Membership("e2e-"+rand.String(5), probe.Membership{Namespaces: []string{"shoot--a--b"}})
			if _, err := k.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: dryRun}); err != nil {
				return err
			}
			return nil
		}, ""},
	}
	for _, ac := range admitted {
		t.Run("admitted/"+ac.name, func(t *testing.T) {
			if err := ac.do(t, ac.as(c), depwatchNS); err != nil {
				t.Errorf("refused in %s: %v", depwatchNS, err)
			}
		})
	}
}

// setEnv sets a variable of the first container, after the Job's own.
func setEnv(s *corev1.PodSpec, name, value string) {
	s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: name, Value: value})
}

// ownTokenProjection mounts, at the service account's path, a projection of the pod's own:
// the real token beside a CA from an annotation, with which KUBERNETES_SERVICE_HOST pointed
// elsewhere would pass the client's TLS check.
func ownTokenProjection(s *corev1.PodSpec) {
	s.Volumes = append(s.Volumes, corev1.Volume{Name: "kube-api-access-own", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "ca.crt",
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['ca']"}}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}})
	s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-own",
		MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
}

// coordinatorJobs are a weeder and a probe Job as the lab's coordinator builds them.
func coordinatorJobs(t *testing.T, tpl jobs.Template) (weeder, probeJob *batchv1.Job) {
	t.Helper()
	cfg, err := coordinator.Options{ConfigFile: filepath.Join(repoRoot, "manifests", "overlays", "local", "config.yaml")}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	w, err := jobs.Weeder(jobs.WeederSpec{Namespace: "e2e-vap", Service: "upstream", Selectors: cfg.Selectors("upstream"),
		WatchDuration: cfg.Watch(), Trigger: jobs.TriggerManual, TriggerTime: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Prober
	ps, err := jobs.Probe(p.ProbeSpec("e2e-vap", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if weeder, err = jobs.Build(tpl, w); err != nil {
		t.Fatal(err)
	}
	if probeJob, err = jobs.Build(tpl, ps); err != nil {
		t.Fatal(err)
	}
	return weeder, probeJob
}

// jobControllersPod is the pod the Job controller creates for j: the template with the
// controller's own labels and its finalizer (the ServiceAccount admission plugin then adds the
// token's volume, as for any pod).
func jobControllersPod(j *batchv1.Job) *corev1.Pod {
	uid := "00000000-0000-0000-0000-" + rand.String(12)
	l := maps.Clone(j.Spec.Template.Labels)
	maps.Copy(l, map[string]string{
		"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": j.Name,
		"controller-uid": uid, "job-name": j.Name,
	})
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: j.Name + "-", Namespace: j.Namespace, Labels: l, Annotations: j.Spec.Template.Annotations,
			Finalizers: []string{"batch.kubernetes.io/job-tracking"},
		},
		Spec: *j.Spec.Template.Spec.DeepCopy(),
	}
}

// serviceAccountClient is a client with a fresh token of service account ns/name (the
// TokenRequest API), as whoever holds that token would have.
func serviceAccountClient(t *testing.T, ns, name string) kubernetes.Interface {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of %s/%s: %v", ns, name, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.WarningHandler = rest.NoWarnings{}
	return kubernetes.NewForConfigOrDie(cfg)
}

// grantLikeDepwatch gives, in ns, the coordinator the rights of its Role in depwatch's
// namespace, and creates the Jobs' service accounts there.
func grantLikeDepwatch(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	role, err := kube.RbacV1().Roles(depwatchNS).Get(ctx, "depwatch-coordinator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the coordinator's Role: %v", err)
	}
	copied := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "depwatch-coordinator", Namespace: ns}, Rules: role.Rules}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "depwatch-coordinator", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "depwatch-coordinator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "depwatch-coordinator", Namespace: depwatchNS}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"depwatch-weeder", "depwatch-probe"} {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC and service accounts reach the authorizer and admission through informers.
	waitFor(t, 30*time.Second, "the coordinator's rights in "+ns, func() (bool, error) {
		out, err := kubectl(t, "auth", "can-i", "create", "jobs.batch", "-n", ns, "--as=system:serviceaccount:"+depwatchNS+":depwatch-coordinator")
		return err == nil && strings.TrimSpace(out) == "yes", nil
	})
}

// kubectlDryRun applies examples/<file>, moved to namespace ns, as a user would: kubectl
// apply, server-side dry run. The error carries kubectl's output.
func kubectlDryRun(t *testing.T, ns, file string) error {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(data), "namespace: "+depwatchNS+"\n", "namespace: "+ns+"\n", 1)
	f := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl(t, "apply", "--dry-run=server", "-f", f)
	if err != nil {
		return apiErrorFromKubectl(err, out)
	}
	return nil
}

// apiErrorFromKubectl turns kubectl's refusal into a Forbidden error carrying its output, so a
// kubectl case is checked as a client-go one is.
func apiErrorFromKubectl(err error, out string) error {
	if strings.Contains(out, "is forbidden") || strings.Contains(out, "Forbidden") {
		return apierrors.NewForbidden(batchv1.Resource("jobs"), "", fmt.Errorf("%s", strings.TrimSpace(out)))
	}
	return fmt.Errorf("kubectl: %v\n%s", err, out)
}
