package addons

import (
	"fmt"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Default versions of every component, in one table. A *_tag label overrides its entry for a
// cluster. The cloud-provider-openstack components (CCM, Cinder CSI, keystone-auth) are released
// per Kubernetes minor and default to the release of the cluster's minor (cloudProviderReleases).
var Defaults = map[string]string{
	"calico":                    "v3.32.1", // as calico_tag's registry default
	"cilium":                    "v1.15.3", // as cilium_tag's registry default
	"flannel":                   "v0.26.7",
	"flannel-cni-plugin":        "v1.6.2-flannel1",
	"metrics-server":            "v0.8.0",
	"csi-attacher":              "v4.8.1",
	"csi-provisioner":           "v5.2.0",
	"csi-snapshotter":           "v8.2.1",
	"csi-resizer":               "v1.13.2",
	"csi-node-driver-registrar": "v2.13.0",
	"livenessprobe":             "v2.15.0",
}

// cloudProviderReleases maps a Kubernetes 1.x minor to the cloud-provider-openstack release for it.
// The table's span narrows the versions the bridge builds (KubernetesVersions: a create or upgrade
// to a version outside it is refused before anything is built). Should one get here all the same,
// a minor newer than the table uses the newest release (its API is the nearest); older than the
// table is refused.
var cloudProviderReleases = map[int]string{
	30: "v1.30.0", 31: "v1.31.0", 32: "v1.32.0", 33: "v1.33.0", 34: "v1.34.0", 35: "v1.35.0", 36: "v1.36.0",
}

const oldestCloudProviderMinor, newestCloudProviderMinor = 30, 36

// Default image repositories (the registry part container_infra_prefix replaces).
var (
	imgCalicoNode        = imageRef{"quay.io/calico", "node"}
	imgCalicoCNI         = imageRef{"quay.io/calico", "cni"}
	imgCalicoControllers = imageRef{"quay.io/calico", "kube-controllers"}
	imgCilium            = imageRef{"quay.io/cilium", "cilium"}
	imgCiliumOperator    = imageRef{"quay.io/cilium", "operator-generic"}
	imgFlannel           = imageRef{"ghcr.io/flannel-io", "flannel"}
	imgFlannelCNI        = imageRef{"ghcr.io/flannel-io", "flannel-cni-plugin"}
	imgCCM               = imageRef{"registry.k8s.io/provider-os", "openstack-cloud-controller-manager"}
	imgCinderCSI         = imageRef{"registry.k8s.io/provider-os", "cinder-csi-plugin"}
	imgKeystoneAuth      = imageRef{"registry.k8s.io/provider-os", "k8s-keystone-auth"}
	imgMetricsServer     = imageRef{"registry.k8s.io/metrics-server", "metrics-server"}
	imgCSIAttacher       = imageRef{"registry.k8s.io/sig-storage", "csi-attacher"}
	imgCSIProvisioner    = imageRef{"registry.k8s.io/sig-storage", "csi-provisioner"}
	imgCSISnapshotter    = imageRef{"registry.k8s.io/sig-storage", "csi-snapshotter"}
	imgCSIResizer        = imageRef{"registry.k8s.io/sig-storage", "csi-resizer"}
	imgCSIRegistrar      = imageRef{"registry.k8s.io/sig-storage", "csi-node-driver-registrar"}
	imgLivenessProbe     = imageRef{"registry.k8s.io/sig-storage", "livenessprobe"}
)

// versions are a cluster's resolved tags, by Defaults key plus the cloud-provider components.
type versions map[string]string

// tagLabels name the label that overrides each component's tag.
var tagLabels = map[string]string{
	"calico": templates.LabelCalicoTag, "cilium": templates.LabelCiliumTag, "flannel": templates.LabelFlannelTag, "flannel-cni-plugin": templates.LabelFlannelCNITag,
	"csi-attacher": templates.LabelCSIAttacherTag, "csi-provisioner": templates.LabelCSIProvisionerTag, "csi-snapshotter": templates.LabelCSISnapshotterTag,
	"csi-resizer": templates.LabelCSIResizerTag, "csi-node-driver-registrar": templates.LabelCSINodeDriverRegistrarTag,
	"livenessprobe":            templates.LabelCSILivenessProbeTag,
	"cloud-controller-manager": templates.LabelCloudProviderTag, "cinder-csi-plugin": templates.LabelCinderCSIPluginTag,
	"k8s-keystone-auth": templates.LabelK8sKeystoneAuthTag,
}

// KubernetesVersions are the Kubernetes minors the add-on table has releases for. The bridge builds
// only versions in it and in Cluster API's range (templates.SupportedKubernetesVersions).
func KubernetesVersions() templates.VersionRange {
	return templates.MinorRange(fmt.Sprintf("v1.%d", oldestCloudProviderMinor), fmt.Sprintf("v1.%d", newestCloudProviderMinor))
}

// SupportedKubernetesVersions is the range a cluster's Kubernetes version must lie in: Cluster
// API's narrowed to the add-on table's. The conductor and the discovery document use it.
func SupportedKubernetesVersions() templates.VersionRange {
	return templates.SupportedKubernetesVersions(KubernetesVersions())
}

// CloudProviderRelease is the cloud-provider-openstack release the bridge pairs with a Kubernetes version.
func CloudProviderRelease(kubernetesVersion string) (string, error) {
	v, err := templates.ParseVersion(kubernetesVersion)
	if err != nil {
		return "", err
	}
	minor := int(v.Minor())
	if minor < oldestCloudProviderMinor {
		//lint:ignore ST1005 Kubernetes is a proper noun
		return "", fmt.Errorf("Kubernetes %s is older than any cloud-provider-openstack release the bridge knows (1.%d); set cloud_provider_tag", kubernetesVersion, oldestCloudProviderMinor)
	}
	return cloudProviderReleases[min(minor, newestCloudProviderMinor)], nil
}

func resolveVersions(in Input) (versions, error) {
	v := versions{}
	for k, d := range Defaults {
		v[k] = d
	}
	cp, err := CloudProviderRelease(in.KubernetesVersion)
	if err != nil && in.Cloud != nil && strings.TrimSpace(in.Labels[templates.LabelCloudProviderTag]) == "" {
		return nil, err
	}
	for _, k := range []string{"cloud-controller-manager", "cinder-csi-plugin", "k8s-keystone-auth"} {
		v[k] = cp
	}
	for k, label := range tagLabels {
		if t := strings.TrimSpace(in.Labels[label]); t != "" {
			v[k] = t
		}
	}
	return v, nil
}
