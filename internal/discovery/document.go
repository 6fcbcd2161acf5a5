// Package discovery serves /.well-known/managed-kubernetes.json: what this cloud offers for managed
// Kubernetes, generated from the cloud itself (Keystone's catalog and regions, Nova's public flavors,
// Glance's public images, Magnum's public cluster templates) and from the bridge's own knowledge (the
// label registry, the namespace rule of the Kubernetes-native view). The JSON Schema is
// docs/managed-kubernetes.schema.json; docs/discovery.md explains the fields.
package discovery

import (
	"slices"
	"sort"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

// SchemaVersion is the document's "schema_version"; bump it with an incompatible change of the schema.
const SchemaVersion = "1"

// WellKnownPath is where the document is served.
const WellKnownPath = "/.well-known/managed-kubernetes.json"

// Document is the discovery document.
type Document struct {
	SchemaVersion string    `json:"schema_version"`
	GeneratedAt   time.Time `json:"generated_at"`
	// Interfaces are the ways to provision and inspect clusters.
	// Interfaces are a MagnumInterface and, with the tenant view, a KubernetesInterface.
	Interfaces         []any               `json:"interfaces"`
	Regions            []Region            `json:"regions"`
	NodeTypes          []NodeType          `json:"node_types"`
	KubernetesVersions []KubernetesVersion `json:"kubernetes_versions"`
	// DefaultKubernetesVersion is what a cluster gets when neither its labels nor its image say.
	DefaultKubernetesVersion string         `json:"default_kubernetes_version"`
	StorageClasses           StorageClasses `json:"storage_classes"`
	Labels                   []Label        `json:"labels"`
	NotStandardised          []string       `json:"not_standardised"`
}

// MagnumInterface is the Magnum API (the CLI, Terraform, Horizon, plain HTTP): its public endpoint
// per region, from the catalog.
type MagnumInterface struct {
	Type          string     `json:"type"` // "openstack-magnum"
	Endpoints     []Endpoint `json:"endpoints"`
	Documentation string     `json:"documentation,omitempty"`
}

// KubernetesInterface is the project's CAPI objects in the management cluster, read-only, and with
// the tenant API its MagnumClusters, which the project's members write.
type KubernetesInterface struct {
	Type                     string   `json:"type"` // "kubernetes-native"
	Server                   string   `json:"server"`
	CertificateAuthorityData string   `json:"certificate_authority_data,omitempty"`
	NamespaceRule            string   `json:"namespace_rule"`
	Authentication           string   `json:"authentication"`
	Access                   string   `json:"access"`
	Resources                []string `json:"resources"`
	// APIs are the bridge's own APIs served there (the tenant API); none without it.
	APIs          []KubernetesAPI `json:"apis,omitempty"`
	Documentation string          `json:"documentation,omitempty"`
}

// KubernetesAPI is a kind a client may write to provision clusters through the management cluster:
// its group, version, kind and plural resource name, and the namespace to write it in.
type KubernetesAPI struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	// Namespace is the namespace rule: the project's namespace, <namespace_prefix><keystone project id>.
	Namespace string `json:"namespace"`
}

// Endpoint is a catalog endpoint.
type Endpoint struct {
	Region string `json:"region"`
	URL    string `json:"url"`
}

// Region is a Keystone region.
type Region struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
}

// NodeType is a public Nova flavor.
type NodeType struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	VCPUs   int    `json:"vcpus"`
	RAMMiB  int    `json:"ram_mib"`
	DiskGiB int    `json:"disk_gib"`
}

// KubernetesVersion is a version the bridge can build, and what gives it.
type KubernetesVersion struct {
	Version   string   `json:"version"`
	Images    []string `json:"images,omitempty"`
	Templates []string `json:"templates,omitempty"`
}

// StorageClasses are the storage classes a workload cluster gets.
type StorageClasses struct {
	Available bool     `json:"available"`
	Classes   []string `json:"classes"`
	Note      string   `json:"note"`
}

// Label is a Magnum label the bridge accepts.
type Label struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Default     string `json:"default,omitempty"`
	Description string `json:"description"`
	Implemented bool   `json:"implemented"`
	NodeGroup   bool   `json:"node_group,omitempty"`
}

// Facts are what the cloud says, as gathered by a Cloud.
type Facts struct {
	MagnumEndpoints []Endpoint
	Regions         []Region
	Flavors         []NodeType
	Images          []Image
	Templates       []Template
	// VolumeTypes are Cinder's; nil when the cloud has no Cinder.
	VolumeTypes []string
}

// Image is a public Glance image.
type Image struct {
	ID, Name, OSDistro string
	// KubeVersion is the image's kube_version property, if any.
	KubeVersion string
}

// Template is a public Magnum cluster template.
type Template struct {
	Name, ImageID, COE string
	Labels             map[string]string
}

// Settings are the bridge's own contributions to the document.
type Settings struct {
	// Flavor is the default infrastructure (labels[].implemented is for it); AllowedFlavors are
	// those a template may choose (the tenant view's infrastructure resources are theirs).
	Flavor                   templates.Flavor
	AllowedFlavors           []templates.Flavor
	NamespacePrefix          string
	DefaultKubernetesVersion string
	// KubernetesVersions are the versions a cluster may get (zero: addons.SupportedKubernetesVersions);
	// AllowKubeTagImageMismatch is [bridge] allow_kube_tag_image_mismatch. kubernetes_versions
	// lists what the conductor's check accepts with them.
	KubernetesVersions        templates.VersionRange
	AllowKubeTagImageMismatch bool
	// TenantView: the kubernetes-native interface is offered ([bridge] tenant_view).
	TenantView bool
	// TenantAPI: that interface also lists the tenant API's MagnumCluster ([bridge] tenant_api;
	// only with TenantView).
	TenantAPI bool
	// Server and CA are the management cluster's API server as tenants reach it.
	Server, CertificateAuthorityData string
}

// kubernetesDistros are the os_distro values whose images magnum-api accepts for a Kubernetes template.
var kubernetesDistros = map[string]bool{"ubuntu": true, "flatcar": true, "fedora-coreos": true, "rocky": true, "centos": true}

// Build assembles the document. It is pure: the same facts give the same document (but for
// generated_at).
func Build(f Facts, s Settings, now time.Time) Document {
	d := Document{SchemaVersion: SchemaVersion, GeneratedAt: now.UTC().Truncate(time.Second),
		DefaultKubernetesVersion: s.DefaultKubernetesVersion, Regions: f.Regions, NodeTypes: f.Flavors}
	if d.Regions == nil {
		d.Regions = []Region{}
	}
	if d.NodeTypes == nil {
		d.NodeTypes = []NodeType{}
	}
	sort.Slice(d.NodeTypes, func(i, j int) bool { return d.NodeTypes[i].Name < d.NodeTypes[j].Name })
	endpoints := f.MagnumEndpoints
	if endpoints == nil {
		endpoints = []Endpoint{}
	}
	d.Interfaces = append(d.Interfaces, MagnumInterface{Type: "openstack-magnum", Endpoints: endpoints,
		Documentation: "OpenStack Magnum container-infra API v1: openstack coe …, Terraform openstack_containerinfra_*, Horizon"})
	if s.TenantView {
		namespace := s.NamespacePrefix + "<keystone project id>"
		k := KubernetesInterface{Type: "kubernetes-native", Server: s.Server, CertificateAuthorityData: s.CertificateAuthorityData,
			NamespaceRule:  namespace,
			Authentication: "a Keystone token as bearer token (kubeconfig exec credential running `openstack token issue`), validated by the bridge's token webhook",
			Access:         "read-only (get, list, watch) in the token's project namespace; never Secrets",
			Resources: append([]string{"clusters.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io",
				"machines.cluster.x-k8s.io", "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io"}, append(infraResources(s.Flavor, s.AllowedFlavors), "events")...),
			Documentation: "docs/tenant-view.md"}
		if s.TenantAPI {
			k.Access = "read-only (get, list, watch) of the resources in the token's project namespace, never Secrets; " +
				"a token with the member role also writes the apis' objects there (create, update, patch, delete) and, write-only, " +
				"Secrets of type magnum.openstack.org/application-credential (the clouds.yaml they are reconciled with)"
			k.Resources = append(k.Resources, v1alpha1.Resource+"."+v1alpha1.Group)
			k.APIs = []KubernetesAPI{{Group: v1alpha1.Group, Version: v1alpha1.Version, Kind: v1alpha1.Kind, Resource: v1alpha1.Resource,
				Namespace: namespace}}
			k.Documentation = "docs/tenant-view.md, docs/tenant-api.md"
		}
		d.Interfaces = append(d.Interfaces, k)
	}
	policy := templates.VersionPolicy{Supported: s.KubernetesVersions, AllowImageMismatch: s.AllowKubeTagImageMismatch}
	if policy.Supported.IsZero() {
		policy.Supported = addons.SupportedKubernetesVersions()
	}
	d.KubernetesVersions = versions(f, s, policy)
	d.StorageClasses = storageClasses(f.VolumeTypes)
	d.Labels = labels(s.Flavor)
	d.NotStandardised = []string{
		"labels: names and values follow Magnum's drivers (Heat, magnum-cluster-api, magnum-capi-helm); which ones this bridge implements is in labels[].implemented",
		"node types are Nova flavors: names and sizes are this cloud's own",
		"the kubernetes-native interface's objects are Cluster API's (cluster.x-k8s.io), read-only; changes go through the Magnum API",
		"add-ons (CNI choice, CSI, ingress, monitoring) are chosen by labels, not by a standard field",
		"cluster and node-group health are Magnum's status values (CREATE_COMPLETE, …) and health_status (HEALTHY, UNHEALTHY, UNKNOWN)",
	}
	if s.TenantView && s.TenantAPI {
		d.NotStandardised[2] = "the kubernetes-native interface's objects are Cluster API's (cluster.x-k8s.io), read-only, and this bridge's own " +
			"MagnumCluster (apis), which it reconciles through the Magnum API: changes go through the Magnum API either way"
	}
	return d
}

func infraResources(def templates.Flavor, allowed []templates.Flavor) []string {
	var out []string
	for _, f := range append([]templates.Flavor{def}, allowed...) {
		switch {
		case f == templates.FlavorOpenStack && !slices.Contains(out, "openstackclusters.infrastructure.cluster.x-k8s.io"):
			out = append(out, "openstackclusters.infrastructure.cluster.x-k8s.io", "openstackmachines.infrastructure.cluster.x-k8s.io")
		case f == templates.FlavorInMemory && !slices.Contains(out, "devclusters.infrastructure.cluster.x-k8s.io"):
			out = append(out, "devclusters.infrastructure.cluster.x-k8s.io", "devmachines.infrastructure.cluster.x-k8s.io")
		}
	}
	return out
}

// versions are exactly the Kubernetes versions a create would be accepted with
// (templates.CheckKubernetesVersion, as the conductor decides): those of the public Kubernetes
// images (their kube_version property, else the version in their name) in the supported range —
// a template on the image with that kube_tag builds it — and those of Magnum's public templates
// that pass the check on their image (kube_tag, else their image's version, else the default),
// with the images and templates that give each. A template a create from would be refused for
// another reason (a label's value, an infrastructure not offered) gives no version.
func versions(f Facts, s Settings, policy templates.VersionPolicy) []KubernetesVersion {
	def := s.DefaultKubernetesVersion
	byVersion := map[string]*KubernetesVersion{}
	get := func(v string) *KubernetesVersion {
		if byVersion[v] == nil {
			byVersion[v] = &KubernetesVersion{Version: v}
		}
		return byVersion[v]
	}
	// A template names its image by ID or by name, as magnum-api resolves it.
	known := map[string]templates.Image{}
	for _, img := range f.Images {
		known[img.ID] = templates.Image{Name: img.Name, KubeVersion: img.KubeVersion}
		if _, taken := known[img.Name]; !taken {
			known[img.Name] = templates.Image{Name: img.Name, KubeVersion: img.KubeVersion}
		}
	}
	for _, img := range f.Images {
		if !kubernetesDistros[img.OSDistro] {
			continue
		}
		own, _ := templates.Image{Name: img.Name, KubeVersion: img.KubeVersion}.OwnVersion()
		if own == "" {
			continue // no version the bridge could build from this image alone
		}
		v, err := templates.CheckKubernetesVersion(map[string]string{templates.LabelKubeTag: own},
			templates.Image{Ref: img.Name, Name: img.Name, KubeVersion: img.KubeVersion}, def, policy)
		if err != nil {
			continue // outside the supported range
		}
		k := get(v)
		k.Images = append(k.Images, img.Name)
	}
	for _, t := range f.Templates {
		if t.COE != "" && t.COE != "kubernetes" {
			continue
		}
		img := known[t.ImageID] // a public template on an image that is not public: its name decides
		img.Ref = t.ImageID
		v, err := templates.Preflight(templates.Input{Flavor: s.Flavor, AllowedFlavors: s.AllowedFlavors,
			Template: templates.Template{ImageID: t.ImageID}, Cluster: templates.Cluster{Labels: t.Labels},
			DefaultKubernetesVersion: def}, img, policy)
		if err != nil {
			continue // a create from this template is refused
		}
		k := get(v)
		k.Templates = append(k.Templates, t.Name)
	}
	out := make([]KubernetesVersion, 0, len(byVersion))
	for _, k := range byVersion {
		sort.Strings(k.Images)
		sort.Strings(k.Templates)
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return newer(out[i].Version, out[j].Version) })
	return out
}

// storageClasses: every workload cluster gets the Cinder CSI add-on with one default class
// (internal/addons); it can only provision where the cloud has Cinder.
func storageClasses(volumeTypes []string) StorageClasses {
	if volumeTypes == nil {
		return StorageClasses{Classes: []string{},
			Note: "this cloud has no Cinder in its catalog: the Cinder CSI add-on is installed but cannot provision volumes"}
	}
	return StorageClasses{Available: true, Classes: []string{addons.DefaultStorageClass},
		Note: "the default class " + addons.DefaultStorageClass + " (Cinder CSI, WaitForFirstConsumer) uses Cinder's default volume type; " +
			"one class per volume type is not offered yet; Cinder volume types: " + joinOrNone(volumeTypes)}
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	out := s[0]
	for _, x := range s[1:] {
		out += ", " + x
	}
	return out
}

func labels(f templates.Flavor) []Label {
	out := make([]Label, 0, len(templates.Registry))
	for _, s := range templates.Registry {
		if s.Secret {
			continue // nothing about secret-valued labels beyond their existence is useful here
		}
		out = append(out, Label{Name: s.Name, Type: string(s.Type), Default: s.Default, Description: s.Description,
			Implemented: s.Implemented(f), NodeGroup: s.NodeGroup})
	}
	return out
}

// newer orders versions newest first (both are valid: KubernetesVersion checked them).
func newer(a, b string) bool {
	x, errA := templates.ParseVersion(a)
	y, errB := templates.ParseVersion(b)
	if errA != nil || errB != nil {
		return errA == nil
	}
	return x.GreaterThan(y)
}
