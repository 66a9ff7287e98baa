package reaper

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A delete that an admission policy refuses (depwatch's weeder-deletes policy, as the API
// server words its denial) is not a quiet failure: the pod gets a ReapRefused Warning Event
// quoting the policy, the line says "refused" at error level, and the run's report counts it,
// so the coordinator's metric shows it. Any other error stays a plain failure.
func TestADeleteRefusedByAnAdmissionPolicyIsRecordedAndCounted(t *testing.T) {
	denial := "ValidatingAdmissionPolicy 'depwatch-weeder-deletes' with binding 'depwatch-weeder-deletes' denied request: " +
		"depwatch-weeder may delete pod apps/victim only while a container of it is in CrashLoopBackOff"
	for _, tc := range []struct {
		name        string
		err         error
		wantRefused int
		wantAction  string
	}{
		{"refused by a policy", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonForbidden, Code: 403, Message: `pods "victim" is forbidden: ` + denial}}, 1, ActionRefused},
		{"a server timeout", apierrors.NewServerTimeout(corev1.Resource("pods"), "delete", 1), 0, ActionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(newPod("apps", "victim", crashLooping))
			client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			var mu sync.Mutex
			var events []*corev1.Event
			client.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, a.(k8stesting.CreateAction).GetObject().(*corev1.Event))
				return false, nil, nil
			})
			o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "SCHEDULE": "@every 1h", "RUN_DURATION": "300ms", "REAP_AT_START": "true"})
			log, hook := quietLogger()
			s, err := Run(context.Background(), client, o, log)
			if err != nil {
				t.Fatal(err)
			}
			if s.Errors != 1 || s.AdmissionRefused != tc.wantRefused || s.Reaped != 0 {
				t.Errorf("summary %+v; want one error, %d of them refused by admission, nothing reaped", s, tc.wantRefused)
			}
			rep, err := ReadReport(TerminationMessage(s))
			if err != nil || rep.AdmissionRefused != tc.wantRefused {
				t.Errorf("report %+v (%v): want admissionRefused %d", rep, err, tc.wantRefused)
			}
			var actions []string
			for _, e := range hook.AllEntries() {
				if a, ok := e.Data["action"].(string); ok {
					actions = append(actions, a)
				}
			}
			if len(actions) != 1 || actions[0] != tc.wantAction {
				t.Errorf("pod lines with actions %v, want one %q", actions, tc.wantAction)
			}
			mu.Lock()
			defer mu.Unlock()
			refusedEvents := 0
			for _, e := range events {
				if e.Reason == ReasonReapRefused {
					refusedEvents++
					if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, denial) {
						t.Errorf("ReapRefused Event %s %q; want a Warning quoting the policy's denial", e.Type, e.Message)
					}
				}
			}
			if refusedEvents != tc.wantRefused {
				t.Errorf("%d ReapRefused Events (of %d), want %d", refusedEvents, len(events), tc.wantRefused)
			}
		})
	}
}
