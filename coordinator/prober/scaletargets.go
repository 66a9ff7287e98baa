package prober

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/depwatch/depwatch/internal/admission"
	"github.com/depwatch/depwatch/jobs"
)

// scaleTargetsTimeout bounds the first write, made before any namespace is probed; a write
// that fails is retried meanwhile, beside the probing.
const scaleTargetsTimeout = 10 * time.Second

// writeScaleTargets adds the dependents of the running config to the probe policy's
// parameters (jobs.WriteScaleTargets) until ctx ends (KeepScaleTargets): a changed config
// restarts the coordinator, so every config the probes run with is added by the leader that
// runs it, before it probes, and the names of the configs before it stay for their Jobs.
// A service account that may not write it (gardenlet's, under the image swap) is told once:
// the policy then keeps the bound without the names
// (manifests/gardener/dependency-watchdog-admission.yaml).
func (p *Controller) writeScaleTargets(ctx context.Context) bool {
	return KeepScaleTargets(ctx, p.client, p.launcher.Template.ScaleTargets(p.cfg.Resources()), p.log)
}

// KeepScaleTargets adds cm's dependents to the probe policy's parameters at once and, while
// that fails, every 5 s until they are written or ctx ends; it says whether it is done
// (written, or not to be written by this account). The coordinator calls it with no
// dependents when it runs no prober: the parameters are then created empty where missing, so
// that no probe may write anything.
func KeepScaleTargets(ctx context.Context, client kubernetes.Interface, cm *corev1.ConfigMap, log logrus.FieldLogger) bool {
	log = log.WithFields(logrus.Fields{"configmap": cm.Namespace + "/" + cm.Name, "dependents": len(cm.Data)})
	try := func(ctx context.Context) (bool, error) {
		err := jobs.WriteScaleTargets(ctx, client, cm)
		switch {
		case err == nil:
			log.WithField("action", "written").Info("The probe admission policy's parameters list the config's dependents.")
			return true, nil
		case admission.Refused(err):
			// The coordinator-configmaps policy and this code disagree: a bug, not a state to
			// retry.
			log.WithError(err).WithField("action", "admission-refused").
				Error("An admission policy refused the probe admission policy's parameters; the probes' writes may be refused. Report it.")
			return true, nil
		case apierrors.IsForbidden(err):
			log.WithField("action", "skipped").Info("This service account may not write the probe admission policy's parameters; the policy's names list is not kept here.")
			return true, nil
		}
		log.WithError(err).WithField("action", "retry").Warn("Could not write the probe admission policy's parameters; retrying.")
		return false, nil
	}
	return wait.PollUntilContextCancel(ctx, 5*time.Second, true, try) == nil
}
