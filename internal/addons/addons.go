// Package addons is the pure mapping from a cluster (its labels, template network driver, Kubernetes
// version and workload cloud credential) to the add-ons its workload cluster runs: a CNI, the
// OpenStack cloud-controller-manager, Cinder CSI with a default StorageClass, k8s-keystone-auth and
// metrics-server. Every object is written here in Go as a typed Kubernetes API object (no upstream
// chart or manifest is copied or fetched); the default versions are pinned in one table (versions.go)
// and every image goes through container_infra_prefix. The objects reach the workload cluster through
// Cluster API's own ClusterResourceSet: one resource-set Secret and one ClusterResourceSet (strategy
// Reconcile) per cluster in its project namespace. The package does no I/O.
package addons

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Input is everything the add-on set depends on.
type Input struct {
	Flavor      templates.Flavor
	Namespace   string // the project namespace (the CRS and its Secret live there, next to the Cluster)
	ClusterName string // the CAPI Cluster's name (Magnum's stack_id)
	ClusterUUID string
	ProjectID   string
	// KubernetesVersion is the cluster's version (vX.Y.Z): the cloud-provider-openstack components
	// follow its minor unless a *_tag label pins them.
	KubernetesVersion string
	// NetworkDriver is the template's network_driver: calico (also when empty), cilium or flannel.
	NetworkDriver string
	// PodCIDR is the Cluster's pod network (spec.clusterNetwork.pods).
	PodCIDR string
	// Labels are the cluster's effective labels.
	Labels map[string]string
	// Cloud is the workload application credential (the bridge's <cluster>-workload-cloud-config
	// Secret, never CAPO's); nil when the cluster has none, which leaves out everything that talks
	// to OpenStack (cloud-config, CCM, Cinder CSI, keystone-auth).
	Cloud *Credential
}

// Addon names, also the keys of the resource-set Secret (<name>.yaml).
const (
	CNI             = "cni"
	CloudConfig     = "cloud-config"
	CloudController = "openstack-cloud-controller-manager"
	CinderCSI       = "cinder-csi"
	KeystoneAuth    = "k8s-keystone-auth"
	MetricsServer   = "metrics-server"
)

// Labels and annotations of what the package renders.
const (
	// AnnotationInventory on the ClusterResourceSet lists, as JSON, every object it delivers, so the
	// bridge can delete from the workload cluster what a later rendering no longer contains (a CRS
	// never prunes).
	AnnotationInventory = "magnum.openstack.org/addon-inventory"
	labelAddon          = "magnum.openstack.org/addon"
	// AnnotationCloudConfigHash on the pod template of everything that reads kube-system/cloud-config:
	// the components read it only at start, so a new credential (rotation) or setting rolls them.
	AnnotationCloudConfigHash = "magnum.openstack.org/cloud-config-sha256"
	// AnnotationAddonSet on the Cluster names its add-on set: the status sync completes an
	// operation only once CAPI has applied that set to the cluster.
	AnnotationAddonSet = "magnum.openstack.org/addon-set"
	// SecretType is the Secret type a ClusterResourceSet accepts as a resource.
	SecretType = "addons.cluster.x-k8s.io/resource-set"
)

// ObjectRef names an object in the workload cluster, with its resource so it can be deleted
// without discovery.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (r ObjectRef) String() string {
	gr := r.Resource
	if r.Group != "" {
		gr += "." + r.Group
	}
	if r.Namespace != "" {
		return gr + " " + r.Namespace + "/" + r.Name
	}
	return gr + " " + r.Name
}

// GroupVersionResource of the referenced object.
func (r ObjectRef) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// Set is the rendering: what to apply in the management cluster and what it delivers.
type Set struct {
	// Secret is the resource-set Secret (one key per add-on) and ResourceSet the ClusterResourceSet
	// that delivers it; both in the project namespace, labelled with the cluster's uuid.
	Secret, ResourceSet *unstructured.Unstructured
	// Addons are the add-ons enabled, in delivery order.
	Addons []string
	// Objects are the typed objects delivered, per add-on.
	Objects map[string][]runtime.Object
	// Inventory lists every delivered object (also in the CRS's AnnotationInventory).
	Inventory []ObjectRef
	// Withheld are objects of kinds the flavor's workload API server cannot hold (the in-memory
	// backend: StorageClass, APIService). They are not delivered; tests dry-run them against the
	// management kube-apiserver instead.
	Withheld []runtime.Object
	// Images are every container image the delivered objects run, sorted.
	Images []string
}

// ResourceSetName is the name of a cluster's CRS and of its Secret.
func ResourceSetName(clusterName string) string { return clusterName + "-addons" }

// Render computes the add-on set of a cluster. Errors name the label or input to fix.
func Render(in Input) (*Set, error) {
	if in.ClusterName == "" || in.ClusterUUID == "" || in.Namespace == "" {
		return nil, fmt.Errorf("add-ons: cluster name, uuid and namespace are required")
	}
	v, err := resolveVersions(in)
	if err != nil {
		return nil, err
	}
	type addon struct {
		name  string
		build func(Input, versions) ([]runtime.Object, error)
	}
	var list []addon
	cni, err := cniBuilder(in.NetworkDriver)
	if err != nil {
		return nil, err
	}
	list = append(list, addon{CNI, cni})
	if in.Cloud != nil {
		list = append(list, addon{CloudConfig, cloudConfig})
		if templates.LabelEnabled(in.Labels, templates.LabelCloudProviderEnabled) {
			list = append(list, addon{CloudController, cloudControllerManager})
		}
		if templates.LabelEnabled(in.Labels, templates.LabelCinderCSIEnabled) {
			list = append(list, addon{CinderCSI, cinderCSI})
		}
		if templates.LabelEnabled(in.Labels, templates.LabelKeystoneAuthEnabled) {
			list = append(list, addon{KeystoneAuth, keystoneAuth})
		}
	}
	if templates.LabelEnabled(in.Labels, templates.LabelMetricsServerEnabled) {
		list = append(list, addon{MetricsServer, metricsServer})
	}

	set := &Set{Objects: map[string][]runtime.Object{}}
	data := map[string][]byte{}
	images := map[string]bool{}
	cloudHash, err := cloudConfigHash(in)
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		objs, err := a.build(in, v)
		if err != nil {
			return nil, fmt.Errorf("add-on %s: %w", a.name, err)
		}
		rollOnCloudConfigChange(objs, cloudHash)
		var docs bytes.Buffer
		for _, o := range objs {
			if !storable(in.Flavor, o) {
				set.Withheld = append(set.Withheld, o)
				continue
			}
			u, err := toUnstructured(o)
			if err != nil {
				return nil, fmt.Errorf("add-on %s: %w", a.name, err)
			}
			u.SetLabels(templates.MergeLabels(u.GetLabels(), map[string]string{
				templates.LabelManagedBy: templates.ManagedByValue, labelAddon: a.name}))
			ref, err := refOf(u)
			if err != nil {
				return nil, fmt.Errorf("add-on %s: %w", a.name, err)
			}
			set.Inventory = append(set.Inventory, ref)
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return nil, err
			}
			docs.WriteString("---\n")
			docs.Write(b)
			for _, img := range imagesOf(o) {
				images[img] = true
			}
			set.Objects[a.name] = append(set.Objects[a.name], o)
		}
		set.Addons = append(set.Addons, a.name)
		data[a.name+".yaml"] = docs.Bytes()
	}
	for img := range images {
		set.Images = append(set.Images, img)
	}
	sort.Strings(set.Images)

	owner := map[string]string{templates.LabelManagedBy: templates.ManagedByValue,
		templates.LabelClusterUUID: in.ClusterUUID, templates.LabelProjectID: in.ProjectID}
	name := ResourceSetName(in.ClusterName)
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: owner},
		Type:       SecretType,
		Data:       data,
	}
	inventory, err := json.Marshal(set.Inventory)
	if err != nil {
		return nil, err
	}
	crs := &addonsv1.ClusterResourceSet{
		TypeMeta: metav1.TypeMeta{APIVersion: addonsv1.GroupVersion.String(), Kind: "ClusterResourceSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: owner,
			Annotations: map[string]string{AnnotationInventory: string(inventory)}},
		Spec: addonsv1.ClusterResourceSetSpec{
			// The Cluster carries its uuid as a label (internal/templates): the set selects exactly it.
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{templates.LabelClusterUUID: in.ClusterUUID}},
			Strategy:        string(addonsv1.ClusterResourceSetStrategyReconcile),
			Resources:       []addonsv1.ResourceRef{{Kind: string(addonsv1.SecretClusterResourceSetResourceKind), Name: name}},
		},
	}
	if set.Secret, err = toUnstructured(secret); err != nil {
		return nil, err
	}
	if set.ResourceSet, err = toUnstructured(crs); err != nil {
		return nil, err
	}
	return set, nil
}

// storable reports whether the flavor's workload API server can hold the object. CAPD's in-memory
// server has a fixed list of resources (cluster-api test/infrastructure/inmemory/pkg/server/api):
// no StorageClass and no APIService among them.
func storable(f templates.Flavor, o runtime.Object) bool {
	if f != templates.FlavorInMemory {
		return true
	}
	_, ok := inMemoryResources[kindOf(o)]
	return ok
}

// toUnstructured converts a typed object, dropping the zero-valued fields the converter keeps.
func toUnstructured(o runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return u, nil
}

func refOf(u *unstructured.Unstructured) (ObjectRef, error) {
	gvk := u.GroupVersionKind()
	res, ok := resources[gvk.Kind]
	if !ok {
		return ObjectRef{}, fmt.Errorf("no resource known for kind %s", gvk.Kind)
	}
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Resource: res, Namespace: u.GetNamespace(), Name: u.GetName()}, nil
}

// kindOf is the Kind a typed object declares in its TypeMeta (every builder sets it).
func kindOf(o runtime.Object) string { return o.GetObjectKind().GroupVersionKind().Kind }

// resources are the plural resource names of every kind the package renders.
var resources = map[string]string{
	"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps", "Secret": "secrets",
	"Service": "services", "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
	"Role": "roles", "RoleBinding": "rolebindings", "DaemonSet": "daemonsets", "Deployment": "deployments",
	"CSIDriver": "csidrivers", "StorageClass": "storageclasses", "CustomResourceDefinition": "customresourcedefinitions",
	"APIService": "apiservices",
}

// inMemoryResources are the kinds CAPD's in-memory workload API server stores (of those rendered here).
var inMemoryResources = map[string]struct{}{
	"Namespace": {}, "ServiceAccount": {}, "ConfigMap": {}, "Secret": {}, "Service": {}, "ClusterRole": {},
	"ClusterRoleBinding": {}, "Role": {}, "RoleBinding": {}, "DaemonSet": {}, "Deployment": {}, "CSIDriver": {},
	"CustomResourceDefinition": {},
}

// imagesOf lists the images of a workload object's pod template.
func imagesOf(o runtime.Object) []string {
	spec := podSpecOf(o)
	if spec == nil {
		return nil
	}
	var out []string
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		out = append(out, c.Image)
	}
	return out
}

// imageRef is a default image: repository path (without the registry's last component) and name.
type imageRef struct {
	repo, name string
}

// image resolves an image: container_infra_prefix replaces the repository of every image (as the
// anchors do: <prefix><name>:<tag>), so an air-gapped cloud mirrors them under one path.
func (in Input) image(ref imageRef, tag string) string {
	if p := strings.TrimSpace(in.Labels[templates.LabelContainerInfraPrefix]); p != "" {
		return strings.TrimSuffix(p, "/") + "/" + ref.name + ":" + tag
	}
	return ref.repo + "/" + ref.name + ":" + tag
}
