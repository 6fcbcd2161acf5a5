package addons

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
)

// keystonePolicy maps the project's Keystone roles to Kubernetes permissions (k8s-keystone-auth's
// policy format): member and admin of the cluster's project may do everything, reader may read.
func keystonePolicy(projectID string) (string, error) {
	type users struct {
		Projects []string `json:"projects"`
		Roles    []string `json:"roles"`
	}
	type policy struct {
		Users        users               `json:"users"`
		Resource     map[string][]string `json:"resource_permissions"`
		NonResources map[string][]string `json:"nonresource_permissions"`
	}
	b, err := json.Marshal([]policy{
		{Users: users{Projects: []string{projectID}, Roles: []string{"admin", "member"}},
			Resource: map[string][]string{"*/*": {"*"}}, NonResources: map[string][]string{"*": {"*"}}},
		{Users: users{Projects: []string{projectID}, Roles: []string{"reader"}},
			Resource: map[string][]string{"*/*": {"get", "list", "watch"}}, NonResources: map[string][]string{"*": {"get"}}},
	})
	return string(b), err
}

// keystoneAuth runs the k8s-keystone-auth webhook on the control-plane nodes, serving with the
// API server's own certificate (the kube-apiserver there is its only client).
func keystoneAuth(in Input, v versions) ([]runtime.Object, error) {
	const name = "k8s-keystone-auth"
	a, err := parseCredential(in.Cloud)
	if err != nil {
		return nil, err
	}
	pol, err := keystonePolicy(in.ProjectID)
	if err != nil {
		return nil, err
	}
	objs := []runtime.Object{configMap(kubeSystem, "k8s-keystone-auth-policy", map[string]string{"policies": pol})}
	objs = append(objs, identity(kubeSystem, name,
		rule(core, []string{"configmaps"}, readVerbs),
		rule([]string{rbacv1.GroupName}, []string{"rolebindings", "clusterrolebindings", "roles", "clusterroles"}, readVerbs),
	)...)
	spec := corev1.PodSpec{
		HostNetwork: true, ServiceAccountName: name, PriorityClassName: clusterCritical,
		NodeSelector: controlPlaneOnly, Tolerations: tolerateControlPl,
		Containers: []corev1.Container{{Name: name, Image: in.image(imgKeystoneAuth, v["k8s-keystone-auth"]),
			Args: []string{"./bin/k8s-keystone-auth", "--v=2", "--tls-cert-file=/etc/kubernetes/pki/apiserver.crt",
				"--tls-private-key-file=/etc/kubernetes/pki/apiserver.key", "--policy-configmap-name=k8s-keystone-auth-policy",
				"--keystone-url=" + a.AuthURL, "--listen=127.0.0.1:8443"},
			VolumeMounts: []corev1.VolumeMount{{Name: "pki", MountPath: "/etc/kubernetes/pki", ReadOnly: true}}}},
		Volumes: []corev1.Volume{hostPath("pki", "/etc/kubernetes/pki", corev1.HostPathDirectory)},
	}
	if len(in.Cloud.CACert) > 0 {
		spec.Containers[0].Args = append(spec.Containers[0].Args, "--keystone-ca-file="+cloudConfigDir+"/ca.crt")
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, cloudConfigMount)
		spec.Volumes = append(spec.Volumes, secretVolume("cloud-config", CloudConfigName))
	}
	return append(objs, daemonSet(kubeSystem, name, spec)), nil
}

func metricsServer(in Input, v versions) ([]runtime.Object, error) {
	const name = "metrics-server"
	objs := identity(kubeSystem, name,
		rule(core, []string{"nodes/metrics"}, []string{"get"}),
		rule(core, []string{"pods", "nodes"}, readVerbs),
	)
	aggregated := clusterRole("system:aggregated-metrics-reader", rule([]string{"metrics.k8s.io"}, []string{"pods", "nodes"}, readVerbs))
	aggregated.Labels = map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true",
		"rbac.authorization.k8s.io/aggregate-to-edit": "true", "rbac.authorization.k8s.io/aggregate-to-admin": "true"}
	authReader := &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server-auth-reader", Namespace: kubeSystem},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: kubeSystem, Name: name}}}
	objs = append(objs, aggregated, authReader,
		clusterRoleBinding("metrics-server:system:auth-delegator", "system:auth-delegator", kubeSystem, name))
	service := &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: objectMeta(kubeSystem, name, name),
		Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": name},
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("https")}}}}
	spec := corev1.PodSpec{
		ServiceAccountName: name, PriorityClassName: clusterCritical, Tolerations: tolerateControlPl,
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Containers: []corev1.Container{{Name: name, Image: in.image(imgMetricsServer, v["metrics-server"]),
			Args: []string{"--cert-dir=/tmp", "--secure-port=10250", "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
				"--kubelet-use-node-status-port", "--metric-resolution=15s"},
			Ports:        []corev1.ContainerPort{{Name: "https", ContainerPort: 10250, Protocol: corev1.ProtocolTCP}},
			VolumeMounts: []corev1.VolumeMount{mount("tmp-dir", "/tmp")},
			SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		Volumes: []corev1.Volume{{Name: "tmp-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	api := &apiregistrationv1.APIService{TypeMeta: typeMeta("apiregistration.k8s.io/v1", "APIService"),
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1",
			Service:               &apiregistrationv1.ServiceReference{Namespace: kubeSystem, Name: name},
			InsecureSkipTLSVerify: true, GroupPriorityMinimum: 100, VersionPriority: 100}}
	return append(objs, service, deployment(kubeSystem, name, 1, spec), api), nil
}
