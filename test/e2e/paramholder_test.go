//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// holdParamInformers installs, once per cluster and for good, a policy and a binding that name
// each built-in parameter kind depwatch's admission policies read (PodTemplate: depwatch-jobs;
// ConfigMap: the opt-in policies) and act on nothing. kube-apiserver up to 1.36 stops its
// informer on a built-in parameter kind, for the life of the process, the moment no binding
// names that kind (kubernetes/kubernetes#133827, #130887; fixed by #134423, backport #142150
// not released): a suite that removes the lab, or a test that uninstalls a chart release,
// would leave every later binding answering "no params found" and refusing every pod in its
// namespace. While these hold a binding, the informers keep running.
func holdParamInformers() error {
	ctx := context.Background()
	for _, kind := range []string{"PodTemplate", "ConfigMap"} {
		name := "depwatch-e2e-holds-" + strings.ToLower(kind) + "-params"
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
				ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: kind},
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"limitranges"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: name,
				ParamRef: &admissionregistrationv1.ParamRef{Name: name, Namespace: "default",
					ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)},
				// No namespace has this label: the binding acts on nothing.
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"depwatch.io/e2e-holds-params": "never"}}},
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
		api := kube.AdmissionregistrationV1()
		if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ValidatingAdmissionPolicy %s: %w", name, err)
		}
		if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ValidatingAdmissionPolicyBinding %s: %w", name, err)
		}
	}
	return nil
}
