package autoscaler

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Problem says why the autoscaler of a cluster is not running, from its Deployment's conditions,
// for the cluster's status reason; "" when nothing is known to be wrong. A Pod the Deployment could
// not create (a quota, an admission policy) shows as ReplicaFailure; a Pod that never became ready
// (an image that cannot be pulled, a kubeconfig Secret that does not exist yet) stops the rollout's
// progress once progressDeadline has passed.
func Problem(d *appsv1.Deployment) string {
	if d == nil || d.Generation != d.Status.ObservedGeneration {
		return "" // the conditions describe an earlier spec
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return problem(c)
		}
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
			return problem(c)
		}
	}
	return ""
}

func problem(c appsv1.DeploymentCondition) string {
	msg := strings.TrimSpace(strings.TrimSuffix(c.Message, "."))
	if msg == "" {
		msg = c.Reason
	}
	return "the cluster autoscaler cannot run (" + c.Reason + "): " + msg
}
