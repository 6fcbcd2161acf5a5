package autoscaler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Objects are the autoscaler of one cluster, in its project namespace.
type Objects struct {
	ServiceAccount *corev1.ServiceAccount
	Role           *rbacv1.Role
	RoleBinding    *rbacv1.RoleBinding
	Deployment     *appsv1.Deployment
}

// Render builds the autoscaler's objects. It fails, naming what is wrong, for a missing field, bad
// settings or a Kubernetes version without a known autoscaler release (and no autoscaler_tag).
func Render(in Input) (*Objects, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	image, err := Image(in.KubernetesVersion, in.Prefix, in.Tag)
	if err != nil {
		return nil, err
	}
	name := Name(in.Cluster)
	meta := func(kind, apiVersion string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{Kind: kind, APIVersion: apiVersion}, metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: in.labels()}
	}
	o := &Objects{ServiceAccount: &corev1.ServiceAccount{}, Role: &rbacv1.Role{}, RoleBinding: &rbacv1.RoleBinding{}, Deployment: &appsv1.Deployment{}}
	o.ServiceAccount.TypeMeta, o.ServiceAccount.ObjectMeta = meta("ServiceAccount", "v1")
	o.Role.TypeMeta, o.Role.ObjectMeta = meta("Role", rbacv1.SchemeGroupVersion.String())
	o.Role.Rules = in.rules()
	o.RoleBinding.TypeMeta, o.RoleBinding.ObjectMeta = meta("RoleBinding", rbacv1.SchemeGroupVersion.String())
	o.RoleBinding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
	o.RoleBinding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: in.Namespace}}
	o.Deployment.TypeMeta, o.Deployment.ObjectMeta = meta("Deployment", appsv1.SchemeGroupVersion.String())
	o.Deployment.Spec = in.deployment(name, image)
	o.Deployment.Annotations = map[string]string{AnnotationRendered: in.digest(image)}
	return o, nil
}

// AnnotationRendered on the autoscaler's Deployment is a digest of what its objects were rendered
// from: the bridge applies them again only when the digest it renders differs, so the status
// events of a cluster cost the apiserver nothing.
const AnnotationRendered = "magnum.openstack.org/autoscaler-rendered-sha256"

func (in Input) digest(image string) string {
	in.MachineDeployments = slices.Compact(slices.Sorted(slices.Values(in.MachineDeployments)))
	b, _ := json.Marshal(struct {
		In    Input
		Image string
	}{in, image})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// capiGroup and infraGroup are Cluster API's core and infrastructure API groups.
const (
	capiGroup  = "cluster.x-k8s.io"
	infraGroup = "infrastructure.cluster.x-k8s.io"
)

// rules: reads of the Cluster API objects the clusterapi provider watches in the namespace (and of
// the machine templates it sizes a group from when it is at zero); changes to the replicas of the
// cluster's own MachineDeployments, named; Machines annotated for deletion (which Machines is
// confined to the cluster by the admission policy: RBAC cannot name them in advance). No Secret:
// the kubeconfig is mounted by the kubelet, not read by the autoscaler.
func (in Input) rules() []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{capiGroup}, Resources: []string{"machinedeployments", "machinesets", "machines", "machinepools"},
			Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{infraGroup}, Resources: []string{"openstackmachinetemplates", "devmachinetemplates"},
			Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{capiGroup}, Resources: []string{"machines"}, Verbs: []string{"update", "patch"}},
	}
	// An empty resourceNames would grant every MachineDeployment of the namespace: without a
	// MachineDeployment yet, no write at all.
	if names := slices.Sorted(slices.Values(in.MachineDeployments)); len(names) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{capiGroup},
			Resources: []string{"machinedeployments", "machinedeployments/scale"}, ResourceNames: slices.Compact(names),
			Verbs: []string{"get", "update", "patch"}})
	}
	return rules
}

// healthPort is where the autoscaler answers /health-check.
const healthPort = 8085

func (in Input) deployment(name, image string) appsv1.DeploymentSpec {
	selector := map[string]string{"app.kubernetes.io/instance": name}
	return appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		// An image that cannot be pulled shows in the cluster's status reason after this long.
		ProgressDeadlineSeconds: ptr.To[int32](300),
		Selector:                &metav1.LabelSelector{MatchLabels: selector},
		// One autoscaler per cluster at any time: two would both resize the same groups.
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: in.labels()},
			Spec: corev1.PodSpec{
				ServiceAccountName:           name,
				AutomountServiceAccountToken: ptr.To(true), // the management cluster, in-cluster
				PriorityClassName:            PriorityClass,
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name:    Component,
					Image:   image,
					Command: []string{"/cluster-autoscaler"},
					Args:    in.Args(),
					Ports:   []corev1.ContainerPort{{Name: "metrics", ContainerPort: healthPort}},
					LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/health-check", Port: intstr.FromString("metrics")}}, PeriodSeconds: 30},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
					},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "kubeconfig", MountPath: kubeconfigDir, ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: KubeconfigSecret(in.Cluster), Items: []corev1.KeyToPath{{Key: "value", Path: "value"}}}}}},
			},
		},
	}
}
