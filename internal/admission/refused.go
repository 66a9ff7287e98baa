// Package admission recognises a refusal by a ValidatingAdmissionPolicy in an API error.
// depwatch's own policies bound what its weeders may delete and what its probes may scale
// (manifests/admission/weeder-deletes.yaml, probe-scales.yaml); a refusal of depwatch's own
// action is a bug to see at once (an Event and a metric), not an error to retry quietly.
package admission

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The API server's wording of a policy's denial (k8s.io/apiserver's validating admission
// policy plugin): "ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied
// request: <the policy's message>".
const (
	policyPrefix = "ValidatingAdmissionPolicy '"
	deniedMarker = "denied request: "
)

// Refused reports whether err is a ValidatingAdmissionPolicy's denial of the request.
func Refused(err error) bool {
	_, ok := Message(err)
	return ok
}

// Message is the denial's text as the API server gives it (it names the policy and quotes
// the policy's message); ok is false for any other error.
func Message(err error) (string, bool) {
	var s apierrors.APIStatus
	if err == nil || !errors.As(err, &s) {
		return "", false
	}
	msg := s.Status().Message
	i := strings.Index(msg, policyPrefix)
	if i < 0 || !strings.Contains(msg[i:], deniedMarker) {
		return "", false
	}
	return msg[i:], true
}

// Policy is the name of the policy that denied the request, "" when err is no such denial.
func Policy(err error) string {
	msg, ok := Message(err)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(msg, policyPrefix), "'")
	return name
}
