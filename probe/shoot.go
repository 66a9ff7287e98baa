package probe

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/pager"
)

// KubeconfigKey is the key of the kubeconfig in the Secret KUBECONFIG_SECRET_NAME.
const KubeconfigKey = "kubeconfig"

// NodeLeaseNamespace holds the kubelets' heartbeat Leases.
const NodeLeaseNamespace = "kube-node-lease"

// ShootClientFactory builds the client of the control plane's API server from the kubeconfig
// in the Secret; timeout bounds every request. Tests inject fakes here.
type ShootClientFactory func(kubeconfig []byte, timeout time.Duration) (kubernetes.Interface, error)

// NewShootClient is the production ShootClientFactory. The kubeconfig must be self-contained:
// credential plugins (exec, auth-provider) are refused, since a Secret must not be able to make
// the probe run programs. Errors never quote the kubeconfig's content.
func NewShootClient(kubeconfig []byte, timeout time.Duration) (kubernetes.Interface, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("not a valid kubeconfig: %s", redact(err.Error()))
	}
	for name, a := range raw.AuthInfos {
		if a != nil && (a.Exec != nil || a.AuthProvider != nil) {
			return nil, fmt.Errorf("the kubeconfig's user %q uses a credential plugin (exec or auth-provider), which a probe does not run", name)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		// client-go's message quotes names from the kubeconfig unquoted (e.g. "context was
		// not found for specified context: <name>"), which redact cannot catch: say what is
		// wrong in our own words instead.
		return nil, fmt.Errorf("not a usable kubeconfig: %s", unusable(raw))
	}
	cfg.Timeout = timeout
	cfg.UserAgent = "depwatch-probe"
	cfg.QPS, cfg.Burst = 20, 40
	return kubernetes.NewForConfig(protobuf(cfg))
}

// unusable says why client-go refused a kubeconfig without quoting any of it.
func unusable(raw *clientcmdapi.Config) string {
	ctx, ok := raw.Contexts[raw.CurrentContext]
	switch {
	case raw.CurrentContext == "":
		return "it has no current-context"
	case !ok || ctx == nil:
		return "its current-context names no context of the kubeconfig"
	}
	cluster, ok := raw.Clusters[ctx.Cluster]
	switch {
	case !ok || cluster == nil:
		return "the current context's cluster is not defined"
	case cluster.Server == "":
		return "the current context's cluster has no server"
	}
	return "client-go refused it (details withheld: they could quote the Secret)"
}

// quoted matches what parsers quote from their input (go-yaml quotes offending values in
// backticks); it is removed so that no part of a Secret ever reaches a log line.
var quoted = regexp.MustCompile("`[^`]*`|\"[^\"]*\"|'[^']*'")

func redact(s string) string {
	s = quoted.ReplaceAllString(s, "<redacted>")
	return shorten(s)
}

// probeError is why a probe reached no decision, with the probe's result: ResultError for a
// missing Secret, a bad kubeconfig or rejected credentials (a failure); ResultAPIUnreachable
// for a timeout, a network or server error, and ResultThrottled for a 429 (no decision, not a
// failure; the next probe backs off after a 429).
type probeError struct {
	result Result
	err    error
}

func (e *probeError) Error() string { return e.err.Error() }
func (e *probeError) Unwrap() error { return e.err }

func broken(format string, args ...any) *probeError {
	return &probeError{result: ResultError, err: fmt.Errorf(format, args...)}
}

// unreachable: no answer, or one that is not about the probe's setup.
func unreachable(err error) *probeError {
	if apierrors.IsTooManyRequests(err) {
		return &probeError{result: ResultThrottled, err: err}
	}
	return &probeError{result: ResultAPIUnreachable, err: err}
}

// classify: the API server answered but refused the credentials → broken; anything else
// (timeouts, 429, 5xx, connection refused) → unreachable.
func classify(what string, err error) *probeError {
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return broken("%s: the API server rejected the kubeconfig's credentials: %w", what, err)
	}
	return unreachable(fmt.Errorf("%s: %w", what, err))
}

// listMachines lists MCM's Machines in the control-plane namespace of the seed. nil (no
// error) means the kind does not exist there (not a Gardener seed): the Machine rule does not
// apply. A seed that throttles is "unreachable" (no decision, backed off); one that refuses
// the read is a broken setup.
func listMachines(ctx context.Context, dyn dynamic.Interface, namespace string, timeout time.Duration) ([]MachineInfo, *probeError) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := []MachineInfo{}
	err := eachItem(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return dyn.Resource(MachineGVR).Namespace(namespace).List(ctx, opts)
	}, func(u *unstructured.Unstructured) { out = append(out, MachineInfoOf(u)) })
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return nil, broken("listing Machines (%s) in %s of the seed: the probe's service account may not: %v", MachineGVR.GroupResource(), namespace, err)
	case err != nil:
		err = deadline(ctx, err, timeout)
		return nil, unreachable(fmt.Errorf("listing Machines in %s of the seed: %w", namespace, err))
	}
	return out, nil
}

// readKubeconfig reads the Secret from the seed. Its content is never logged.
func readKubeconfig(ctx context.Context, seed kubernetes.Interface, namespace, name string) ([]byte, *probeError) {
	s, err := seed.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, broken("kubeconfig Secret %s/%s not found", namespace, name)
	case err != nil:
		return nil, broken("reading kubeconfig Secret %s/%s: %v", namespace, name, err)
	}
	kc := s.Data[KubeconfigKey]
	if len(kc) == 0 {
		kc = []byte(s.StringData[KubeconfigKey])
	}
	if len(kc) == 0 {
		return nil, broken("kubeconfig Secret %s/%s has no (or an empty) key %q", namespace, name, KubeconfigKey)
	}
	return kc, nil
}

// probeAPIServer asks for the server version within timeout. ServerVersion takes no context,
// so the bound is enforced here as well as by the client's own timeout; the call left behind
// on a timeout ends with that client timeout.
func probeAPIServer(ctx context.Context, shoot kubernetes.Interface, timeout time.Duration) *probeError {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := shoot.Discovery().ServerVersion()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return classify("API-server probe (server version)", err)
		}
		return nil
	case <-ctx.Done():
		return unreachable(fmt.Errorf("API-server probe (server version): no answer within %s", timeout))
	}
}

// listLeaseInput lists the node Leases and the Nodes of the control plane within timeout.
func listLeaseInput(ctx context.Context, shoot kubernetes.Interface, timeout time.Duration) ([]coordinationv1.Lease, map[string]NodeInfo, *probeError) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var leases []coordinationv1.Lease
	err := eachItem(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return shoot.CoordinationV1().Leases(NodeLeaseNamespace).List(ctx, opts)
	}, func(l *coordinationv1.Lease) { leases = append(leases, *l) })
	if err != nil {
		return nil, nil, classify("lease probe (listing Leases in "+NodeLeaseNamespace+")", deadline(ctx, err, timeout))
	}
	nodes := map[string]NodeInfo{}
	err = eachItem(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return shoot.CoreV1().Nodes().List(ctx, opts)
	}, func(n *corev1.Node) { nodes[n.Name] = NodeInfoOf(n) })
	if err != nil {
		return nil, nil, classify("lease probe (listing Nodes)", deadline(ctx, err, timeout))
	}
	return leases, nodes, nil
}

// eachItem pages through a list, calling each with every item of type T.
func eachItem[T runtime.Object](ctx context.Context, list pager.ListPageFunc, each func(T)) error {
	return pager.New(list).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if item, ok := obj.(T); ok {
			each(item)
		}
		return nil
	})
}

func deadline(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return err
}
