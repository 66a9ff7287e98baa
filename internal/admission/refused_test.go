package admission

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The errors are shaped as the API server sends them: a policy's denial is a Status whose
// reason is the policy's (Forbidden here, Invalid if a policy says so) and whose message
// names the policy; RBAC's Forbidden, a webhook's denial, a conflict are not policy refusals.
func TestRefusedRecognisesAPolicysDenialAndNothingElse(t *testing.T) {
	denial := "ValidatingAdmissionPolicy 'depwatch-weeder-deletes' with binding 'depwatch-weeder-deletes' denied request: " +
		"depwatch-weeder may delete only crash-looping pods"
	status := func(reason metav1.StatusReason, code int32, msg string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: reason, Code: code, Message: msg}}
	}
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name   string
		err    error
		want   bool
		policy string
	}{
		{"a policy's Forbidden denial", status(metav1.StatusReasonForbidden, 403, `pods "a" is forbidden: `+denial), true, "depwatch-weeder-deletes"},
		{"a policy's Invalid denial", status(metav1.StatusReasonInvalid, 422, denial), true, "depwatch-weeder-deletes"},
		{"wrapped", fmt.Errorf("deleting pod a: %w", status(metav1.StatusReasonForbidden, 403, denial)), true, "depwatch-weeder-deletes"},
		{"RBAC's Forbidden", apierrors.NewForbidden(gr, "a", errors.New("User \"x\" cannot delete resource \"pods\"")), false, ""},
		{"a webhook's denial", status(metav1.StatusReasonForbidden, 403, `admission webhook "x.example.com" denied the request: no`), false, ""},
		{"a conflict", apierrors.NewConflict(gr, "a", errors.New("uid precondition")), false, ""},
		{"not an API error", errors.New("ValidatingAdmissionPolicy 'x' with binding 'x' denied request: y"), false, ""},
		{"nil", nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Refused(tc.err); got != tc.want {
				t.Errorf("Refused = %v, want %v", got, tc.want)
			}
			if got := Policy(tc.err); got != tc.policy {
				t.Errorf("Policy = %q, want %q", got, tc.policy)
			}
			if msg, ok := Message(tc.err); ok && msg != denial {
				t.Errorf("Message = %q, want the API server's denial %q", msg, denial)
			}
		})
	}
}
