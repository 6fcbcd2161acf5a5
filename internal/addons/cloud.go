package addons

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Credential is the workload cluster's cloud credential as the bridge stores it (the data of
// <cluster>-workload-cloud-config: clouds.yaml with an application credential, and the CA bundle of
// the cloud's endpoints when they need one).
type Credential struct {
	CloudsYAML []byte
	CACert     []byte
}

// cloudAuth is what the in-cluster OpenStack components need from clouds.yaml.
type cloudAuth struct {
	AuthURL, CredentialID, CredentialSecret, Region, Interface string
}

// CloudConfigName is the Secret (kube-system) the CCM and Cinder CSI read.
const CloudConfigName = "cloud-config"

// parseCredential reads the single cloud of the bridge's clouds.yaml. Errors never quote the file:
// it holds the credential's secret.
func parseCredential(c *Credential) (cloudAuth, error) {
	var f struct {
		Clouds map[string]struct {
			Auth struct {
				AuthURL      string `json:"auth_url"`
				CredentialID string `json:"application_credential_id"`
				Secret       string `json:"application_credential_secret"`
			} `json:"auth"`
			Region    string `json:"region_name"`
			Interface string `json:"interface"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(c.CloudsYAML, &f); err != nil {
		return cloudAuth{}, errors.New("the workload cloud credential's clouds.yaml is not valid YAML")
	}
	if len(f.Clouds) != 1 {
		return cloudAuth{}, fmt.Errorf("the workload cloud credential's clouds.yaml has %d clouds, want 1", len(f.Clouds))
	}
	for _, cl := range f.Clouds {
		a := cloudAuth{AuthURL: cl.Auth.AuthURL, CredentialID: cl.Auth.CredentialID, CredentialSecret: cl.Auth.Secret,
			Region: cl.Region, Interface: cl.Interface}
		if a.AuthURL == "" || a.CredentialID == "" || a.CredentialSecret == "" {
			return cloudAuth{}, errors.New("the workload cloud credential's clouds.yaml lacks auth_url or the application credential")
		}
		return a, nil
	}
	panic("unreachable")
}

// iniQuote quotes a value for gcfg, the INI dialect cloud-provider-openstack reads.
func iniQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

const cloudConfigDir = "/etc/config"

// cloudConf renders cloud.conf for the CCM and Cinder CSI from the workload credential.
func cloudConf(in Input, a cloudAuth) string {
	var b strings.Builder
	b.WriteString("[Global]\n")
	fmt.Fprintf(&b, "auth-url=%s\n", iniQuote(a.AuthURL))
	fmt.Fprintf(&b, "application-credential-id=%s\n", iniQuote(a.CredentialID))
	fmt.Fprintf(&b, "application-credential-secret=%s\n", iniQuote(a.CredentialSecret))
	if a.Region != "" {
		fmt.Fprintf(&b, "region=%s\n", iniQuote(a.Region))
	}
	if a.Interface != "" {
		fmt.Fprintf(&b, "interface=%s\n", iniQuote(a.Interface))
	}
	if len(in.Cloud.CACert) > 0 {
		fmt.Fprintf(&b, "ca-file=%s\n", iniQuote(cloudConfigDir+"/ca.crt"))
	}
	b.WriteString("\n[LoadBalancer]\n")
	if p := templates.LabelValue(in.Labels, templates.LabelOctaviaProvider); p != "" {
		fmt.Fprintf(&b, "lb-provider=%s\n", iniQuote(p))
	}
	if alg := templates.LabelValue(in.Labels, templates.LabelOctaviaLBAlgorithm); alg != "" {
		fmt.Fprintf(&b, "lb-method=%s\n", iniQuote(alg))
	}
	fmt.Fprintf(&b, "create-monitor=%t\n", templates.LabelEnabled(in.Labels, templates.LabelOctaviaLBHealthcheck))
	b.WriteString("\n[BlockStorage]\nignore-volume-az=true\n")
	return b.String()
}

// cloudConfig is kube-system/cloud-config: cloud.conf, the clouds.yaml and the CA bundle.
func cloudConfig(in Input, _ versions) ([]runtime.Object, error) {
	a, err := parseCredential(in.Cloud)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{"cloud.conf": []byte(cloudConf(in, a)), "clouds.yaml": in.Cloud.CloudsYAML}
	if len(in.Cloud.CACert) > 0 {
		data["ca.crt"] = in.Cloud.CACert
	}
	return []runtime.Object{&corev1.Secret{TypeMeta: typeMeta("v1", "Secret"),
		ObjectMeta: objectMeta(kubeSystem, CloudConfigName, CloudConfigName), Type: corev1.SecretTypeOpaque, Data: data}}, nil
}

var cloudConfigMount = mount("cloud-config", cloudConfigDir)

// cloudConfigHash identifies the content of kube-system/cloud-config ("" without a credential).
func cloudConfigHash(in Input) (string, error) {
	if in.Cloud == nil {
		return "", nil
	}
	a, err := parseCredential(in.Cloud)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(cloudConf(in, a)))
	h.Write(in.Cloud.CloudsYAML)
	h.Write(in.Cloud.CACert)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// rollOnCloudConfigChange annotates the pod templates that mount kube-system/cloud-config with its hash.
func rollOnCloudConfigChange(objs []runtime.Object, hash string) {
	if hash == "" {
		return
	}
	for _, o := range objs {
		tmpl := podTemplateOf(o)
		if tmpl == nil {
			continue
		}
		for _, vol := range tmpl.Spec.Volumes {
			if vol.Secret != nil && vol.Secret.SecretName == CloudConfigName {
				tmpl.Annotations = templates.MergeLabels(tmpl.Annotations, map[string]string{AnnotationCloudConfigHash: hash})
				break
			}
		}
	}
}

func cloudControllerManager(in Input, v versions) ([]runtime.Object, error) {
	const name = "openstack-cloud-controller-manager"
	objs := identity(kubeSystem, "cloud-controller-manager",
		rule(core, []string{"nodes"}, []string{"get", "list", "watch", "update", "patch", "delete"}),
		rule(core, []string{"nodes/status", "services/status"}, []string{"patch", "update"}),
		rule(core, []string{"services", "endpoints", "configmaps"}, writeVerbs),
		rule(core, []string{"serviceaccounts", "serviceaccounts/token"}, []string{"get", "create", "list", "watch"}),
		rule(core, []string{"secrets", "persistentvolumes"}, readVerbs),
		rule(core, []string{"events"}, []string{"create", "patch", "update"}),
		rule([]string{"coordination.k8s.io"}, []string{"leases"}, writeVerbs),
	)
	spec := corev1.PodSpec{
		HostNetwork: true, ServiceAccountName: "cloud-controller-manager", PriorityClassName: clusterCritical,
		NodeSelector: controlPlaneOnly, Tolerations: tolerateControlPl,
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1001)},
		Containers: []corev1.Container{{Name: name, Image: in.image(imgCCM, v["cloud-controller-manager"]),
			Args: []string{"/bin/openstack-cloud-controller-manager", "--v=1", "--cluster-name=" + in.ClusterName,
				"--cloud-config=" + cloudConfigDir + "/cloud.conf", "--cloud-provider=openstack",
				"--use-service-account-credentials=false", "--bind-address=127.0.0.1"},
			VolumeMounts: []corev1.VolumeMount{cloudConfigMount}}},
		Volumes: []corev1.Volume{secretVolume("cloud-config", CloudConfigName)},
	}
	return append(objs, daemonSet(kubeSystem, name, spec)), nil
}

// CinderDriver is the CSI driver name of Cinder.
const CinderDriver = "cinder.csi.openstack.org"

func cinderCSI(in Input, v versions) ([]runtime.Object, error) {
	const socketDir = "/csi"
	sidecar := func(name string, ref imageRef, key string, args ...string) corev1.Container {
		return corev1.Container{Name: name, Image: in.image(ref, v[key]),
			Args:         append([]string{"--csi-address=" + socketDir + "/csi.sock"}, args...),
			VolumeMounts: []corev1.VolumeMount{mount("socket-dir", socketDir)}}
	}
	plugin := func(extra ...corev1.VolumeMount) corev1.Container {
		return corev1.Container{Name: "cinder-csi-plugin", Image: in.image(imgCinderCSI, v["cinder-csi-plugin"]),
			Args: []string{"/bin/cinder-csi-plugin", "--endpoint=unix://" + socketDir + "/csi.sock",
				"--cloud-config=" + cloudConfigDir + "/cloud.conf", "--cluster=" + in.ClusterName},
			VolumeMounts: append([]corev1.VolumeMount{mount("socket-dir", socketDir), cloudConfigMount}, extra...)}
	}
	objs := identity(kubeSystem, "csi-cinder-controller-sa",
		rule(core, []string{"persistentvolumes"}, writeVerbs),
		rule(core, []string{"persistentvolumeclaims", "persistentvolumeclaims/status"}, []string{"get", "list", "watch", "update", "patch"}),
		rule(core, []string{"nodes", "pods", "secrets"}, readVerbs),
		rule(core, []string{"events"}, []string{"list", "watch", "create", "update", "patch"}),
		rule([]string{"storage.k8s.io"}, []string{"storageclasses", "csinodes"}, readVerbs),
		rule([]string{"storage.k8s.io"}, []string{"volumeattachments", "volumeattachments/status"}, []string{"get", "list", "watch", "update", "patch"}),
		rule([]string{"snapshot.storage.k8s.io"}, []string{"volumesnapshots", "volumesnapshotcontents", "volumesnapshotclasses", "volumesnapshotcontents/status"}, writeVerbs),
		rule([]string{"coordination.k8s.io"}, []string{"leases"}, writeVerbs),
	)
	objs = append(objs, identity(kubeSystem, "csi-cinder-node-sa", rule(core, []string{"nodes"}, []string{"get"}))...)
	controller := corev1.PodSpec{
		ServiceAccountName: "csi-cinder-controller-sa", PriorityClassName: clusterCritical,
		NodeSelector: controlPlaneOnly, Tolerations: tolerateControlPl,
		Containers: []corev1.Container{
			sidecar("csi-attacher", imgCSIAttacher, "csi-attacher", "--timeout=3m", "--leader-election=true"),
			sidecar("csi-provisioner", imgCSIProvisioner, "csi-provisioner", "--timeout=3m", "--default-fstype=ext4",
				"--feature-gates=Topology=true", "--extra-create-metadata", "--leader-election=true"),
			sidecar("csi-snapshotter", imgCSISnapshotter, "csi-snapshotter", "--timeout=3m", "--leader-election=true"),
			sidecar("csi-resizer", imgCSIResizer, "csi-resizer", "--timeout=3m", "--handle-volume-inuse-error=false", "--leader-election=true"),
			sidecar("liveness-probe", imgLivenessProbe, "livenessprobe"),
			plugin(),
		},
		Volumes: []corev1.Volume{{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			secretVolume("cloud-config", CloudConfigName)},
	}
	const pluginDir = "/var/lib/kubelet/plugins/" + CinderDriver
	nodePlugin := plugin(corev1.VolumeMount{Name: "kubelet-dir", MountPath: "/var/lib/kubelet",
		MountPropagation: ptr.To(corev1.MountPropagationBidirectional)}, mount("pods-probe-dir", "/dev"))
	nodePlugin.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true),
		Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}, AllowPrivilegeEscalation: ptr.To(true)}
	node := corev1.PodSpec{
		HostNetwork: true, ServiceAccountName: "csi-cinder-node-sa", PriorityClassName: nodeCritical,
		Tolerations: tolerateEverything,
		Containers: []corev1.Container{
			sidecar("node-driver-registrar", imgCSIRegistrar, "csi-node-driver-registrar",
				"--kubelet-registration-path="+pluginDir+"/csi.sock"),
			sidecar("liveness-probe", imgLivenessProbe, "livenessprobe"),
			nodePlugin,
		},
		Volumes: []corev1.Volume{
			hostPath("socket-dir", pluginDir, corev1.HostPathDirectoryOrCreate),
			hostPath("registration-dir", "/var/lib/kubelet/plugins_registry/", corev1.HostPathDirectory),
			hostPath("kubelet-dir", "/var/lib/kubelet", corev1.HostPathDirectory),
			hostPath("pods-probe-dir", "/dev", corev1.HostPathDirectory),
			secretVolume("cloud-config", CloudConfigName),
		},
	}
	node.Containers[0].VolumeMounts = append(node.Containers[0].VolumeMounts, mount("registration-dir", "/registration"))
	driver := &storagev1.CSIDriver{TypeMeta: typeMeta("storage.k8s.io/v1", "CSIDriver"),
		ObjectMeta: metav1.ObjectMeta{Name: CinderDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}}}
	objs = append(objs, driver, deployment(kubeSystem, "csi-cinder-controllerplugin", 1, controller),
		daemonSet(kubeSystem, "csi-cinder-nodeplugin", node), defaultStorageClass(in))
	return objs, nil
}

// DefaultStorageClass is the name of the Cinder StorageClass marked as the cluster's default.
const DefaultStorageClass = "cinder"

// defaultStorageClass is the cluster's default class on Cinder; WaitForFirstConsumer (the default of
// csi_cinder_volume_binding_mode) creates the volume in the zone the pod lands in.
func defaultStorageClass(in Input) *storagev1.StorageClass {
	params := map[string]string{"csi.storage.k8s.io/fstype": templates.LabelValue(in.Labels, templates.LabelCSICinderFstype)}
	if az := strings.TrimSpace(in.Labels[templates.LabelCSICinderAvailabilityZone]); az != "" {
		params["availability"] = az
	}
	return &storagev1.StorageClass{TypeMeta: typeMeta("storage.k8s.io/v1", "StorageClass"),
		ObjectMeta: metav1.ObjectMeta{Name: DefaultStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:          CinderDriver,
		Parameters:           params,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimPolicy(templates.LabelValue(in.Labels, templates.LabelCSICinderReclaimPolicy))),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingMode(templates.LabelValue(in.Labels, templates.LabelCSICinderVolumeBindingMode))),
		AllowVolumeExpansion: ptr.To(templates.LabelEnabled(in.Labels, templates.LabelCSICinderAllowVolumeExpansion)),
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
