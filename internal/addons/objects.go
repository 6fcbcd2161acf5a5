package addons

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Small constructors for the typed objects every add-on needs.

const kubeSystem = "kube-system"

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func objectMeta(namespace, name, app string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"k8s-app": app}}
}

func serviceAccount(namespace, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: objectMeta(namespace, name, name)}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func rule(groups, resources, verbs []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
}

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	core       = []string{""}
)

// clusterRoleBinding binds a ClusterRole to a ServiceAccount.
func clusterRoleBinding(name, role, saNamespace, sa string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: sa}}}
}

// identity is a ServiceAccount with a ClusterRole of the same name bound to it.
func identity(namespace, name string, rules ...rbacv1.PolicyRule) []runtime.Object {
	return []runtime.Object{serviceAccount(namespace, name), clusterRole(name, rules...),
		clusterRoleBinding(name, name, namespace, name)}
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: objectMeta(namespace, name, name), Data: data}
}

// podTemplate labels the pods with k8s-app=<app> (also the workload's selector).
func podTemplate(app string, spec corev1.PodSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": app}}, Spec: spec}
}

func daemonSet(namespace, name string, spec corev1.PodSpec) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{TypeMeta: typeMeta("apps/v1", "DaemonSet"), ObjectMeta: objectMeta(namespace, name, name),
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}},
			Template:       podTemplate(name, spec),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
		}}
}

func deployment(namespace, name string, replicas int32, spec corev1.PodSpec) *appsv1.Deployment {
	return &appsv1.Deployment{TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: objectMeta(namespace, name, name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}},
			Template: podTemplate(name, spec),
		}}
}

func podTemplateOf(o runtime.Object) *corev1.PodTemplateSpec {
	switch t := o.(type) {
	case *appsv1.DaemonSet:
		return &t.Spec.Template
	case *appsv1.Deployment:
		return &t.Spec.Template
	}
	return nil
}

func podSpecOf(o runtime.Object) *corev1.PodSpec {
	if t := podTemplateOf(o); t != nil {
		return &t.Spec
	}
	return nil
}

// Scheduling every node-level add-on needs: it must run before nodes are Ready or initialized
// (the CNI makes them Ready, the CCM removes the uninitialized taint).
var (
	tolerateEverything = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	controlPlaneOnly   = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	tolerateControlPl  = []corev1.Toleration{
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
	}
)

func hostPath(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
}

func configMapVolume(name, cm string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}
}

func mount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

var privileged = &corev1.SecurityContext{Privileged: ptr.To(true)}

// Every add-on's pods are cluster-critical: without them the cluster does not work.
const (
	nodeCritical    = "system-node-critical"
	clusterCritical = "system-cluster-critical"
)
