package templates

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// API groups of the objects rendered.
const (
	InfraGroupVersion        = "infrastructure.cluster.x-k8s.io/v1beta2"
	ControlPlaneGroupVersion = "controlplane.cluster.x-k8s.io/v1beta2"
	BootstrapGroupVersion    = "bootstrap.cluster.x-k8s.io/v1beta2"
	// WorkerClass is the MachineDeployment class every worker node group uses.
	WorkerClass = "default-worker"
	// Autoscaler annotations read by the cluster-autoscaler's Cluster API provider.
	AutoscalerMinAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	AutoscalerMaxAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
)

// Rendered is the result of a rendering: the class objects (shared by every cluster whose rendering
// gives the same content) and the cluster itself.
type Rendered struct {
	// Flavor is the infrastructure rendered for: the cluster's capi_infrastructure label or the default.
	Flavor       Flavor
	ClassName    string
	ClassObjects []*unstructured.Unstructured
	Cluster      *unstructured.Unstructured
	Version      string
	// Unimplemented lists the labels the bridge does not implement, for the status reason.
	Unimplemented []string
	// ServerGroups (OpenStack flavor) are the Nova server groups the machines are placed in, by
	// name: they must exist before the Cluster is applied and be deleted after it is gone.
	ServerGroups []ServerGroup
}

// ServerGroup is a Nova server group a rendering needs.
type ServerGroup struct {
	Name   string
	Policy string // a Nova policy: soft-anti-affinity, anti-affinity, soft-affinity or affinity
}

// Render maps the input to Kubernetes objects. Errors are *LabelError (the tenant fixes a label) or
// plain errors describing an input the mapping cannot express.
func Render(in Input) (*Rendered, error) {
	in.Flavor = SelectedFlavor(in.Cluster.Labels, in.Flavor)
	if err := checkFlavor(in); err != nil {
		return nil, err
	}
	unimplemented, err := ValidateLabels(in.Flavor, in.Cluster.Labels)
	if err != nil {
		return nil, err
	}
	version, err := KubernetesVersion(in.Cluster.Labels, in.Template.ImageID, in.DefaultKubernetesVersion)
	if err != nil {
		return nil, err
	}
	network, err := resolveNetwork(in)
	if err != nil {
		return nil, err
	}
	if err := validateUpgrade(in); err != nil {
		return nil, err
	}
	var class []*unstructured.Unstructured
	switch in.Flavor {
	case FlavorInMemory:
		class, err = inMemoryClass(in)
	case FlavorOpenStack:
		class, err = openStackClass()
	default:
		return nil, fmt.Errorf("unknown infrastructure flavor %q", in.Flavor)
	}
	if err != nil {
		return nil, err
	}
	if renderingVariant != nil {
		renderingVariant(class)
	}
	className := nameClass(class)
	for _, o := range class {
		o.SetNamespace(in.Namespace)
		// Only labels that follow from the content: templates with equal renderings share the class.
		o.SetLabels(MergeLabels(o.GetLabels(), map[string]string{LabelManagedBy: ManagedByValue}))
	}
	c, topo, err := clusterObject(in, className, version, network)
	if err != nil {
		return nil, err
	}
	r := &Rendered{Flavor: in.Flavor, ClassName: className, ClassObjects: class, Version: version, Unimplemented: unimplemented}
	switch in.Flavor {
	case FlavorInMemory:
		inMemoryNodes(c, topo, in.Cluster.Labels)
	case FlavorOpenStack:
		extra, err := openStackTopology(in, c, topo, network, version)
		if err != nil {
			return nil, err
		}
		r.ServerGroups = extra.serverGroups
	}
	if r.Cluster, err = toUnstructured(c, clusterv1.GroupVersion.String(), "Cluster"); err != nil {
		return nil, err
	}
	return r, nil
}

// classPlaceholder stands for the class name while the content hash is computed.
const classPlaceholder = "CLASSNAME"

// nameClass names the class after its content, so a template edited or re-created later renders a
// new class and never changes one a live cluster uses. It rewrites the placeholder in every object.
func nameClass(objs []*unstructured.Unstructured) string {
	h := sha256.New()
	for _, o := range objs {
		b, _ := json.Marshal(o.Object) // map keys are sorted by encoding/json
		h.Write(b)
	}
	name := "magnum-" + hex.EncodeToString(h.Sum(nil))[:12]
	for _, o := range objs {
		replacePlaceholder(o.Object, name)
	}
	return name
}

func replacePlaceholder(v any, name string) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if s, ok := x.(string); ok && len(s) >= len(classPlaceholder) && s[:len(classPlaceholder)] == classPlaceholder {
				t[k] = name + s[len(classPlaceholder):]
				continue
			}
			replacePlaceholder(x, name)
		}
	case []any:
		for _, x := range t {
			replacePlaceholder(x, name)
		}
	}
}

func obj(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	return u
}

func toUnstructured(o runtime.Object, apiVersion, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	// The converter keeps zero-valued metadata and status the apiserver would reject or ignore.
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

func inMemoryClass(in Input) ([]*unstructured.Unstructured, error) {
	startup, err := time.ParseDuration(labelOr(in.Cluster.Labels, LabelInmemoryMachineStartup))
	if err != nil {
		return nil, &LabelError{Label: LabelInmemoryMachineStartup, Value: in.Cluster.Labels[LabelInmemoryMachineStartup], Reason: "want a duration"}
	}
	fast := map[string]any{"startupDuration": "2s", "startupJitter": "0.2"}
	clusterTmpl := obj(InfraGroupVersion, "DevClusterTemplate", classPlaceholder+"-cluster", map[string]any{
		"template": map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{}}}},
	})
	machineTmpl := obj(InfraGroupVersion, "DevMachineTemplate", classPlaceholder+"-machine", map[string]any{
		"template": map[string]any{"spec": map[string]any{"backend": map[string]any{"inMemory": map[string]any{
			"vm":        map[string]any{"provisioning": map[string]any{"startupDuration": startup.String(), "startupJitter": "0.2"}},
			"node":      map[string]any{"provisioning": fast},
			"apiServer": map[string]any{"provisioning": fast},
			"etcd":      map[string]any{"provisioning": fast},
		}}}},
	})
	cpTmpl := obj(ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate", classPlaceholder+"-control-plane", map[string]any{
		"template": map[string]any{"spec": map[string]any{"kubeadmConfigSpec": map[string]any{
			"clusterConfiguration": map[string]any{"apiServer": map[string]any{"certSANs": []any{"localhost", "127.0.0.1"}}},
		}}},
	})
	workerTmpl := obj(BootstrapGroupVersion, "KubeadmConfigTemplate", classPlaceholder+"-worker", map[string]any{
		"template": map[string]any{"spec": map[string]any{"joinConfiguration": map[string]any{
			"nodeRegistration": map[string]any{"criSocket": "unix:///var/run/containerd/containerd.sock"},
		}}},
	})
	class := &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Name: classPlaceholder},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: ref(InfraGroupVersion, "DevClusterTemplate", classPlaceholder+"-cluster")},
			ControlPlane: clusterv1.ControlPlaneClass{
				TemplateRef: ref(ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate", classPlaceholder+"-control-plane"),
				MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{
					TemplateRef: ref(InfraGroupVersion, "DevMachineTemplate", classPlaceholder+"-machine"),
				},
			},
			Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
				Class:          WorkerClass,
				Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref(BootstrapGroupVersion, "KubeadmConfigTemplate", classPlaceholder+"-worker")},
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref(InfraGroupVersion, "DevMachineTemplate", classPlaceholder+"-machine")},
			}}},
		},
	}
	if LabelEnabled(in.Cluster.Labels, LabelAutoHealingEnabled) {
		class.Spec.Workers.MachineDeployments[0].HealthCheck = workerHealthCheck()
	}
	cc, err := toUnstructured(class, clusterv1.GroupVersion.String(), "ClusterClass")
	if err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{clusterTmpl, machineTmpl, cpTmpl, workerTmpl, cc}, nil
}

// workerHealthCheck replaces a worker whose node is not Ready for 5 minutes or never joins.
func workerHealthCheck() clusterv1.MachineDeploymentClassHealthCheck {
	return clusterv1.MachineDeploymentClassHealthCheck{
		Checks: clusterv1.MachineDeploymentClassHealthCheckChecks{
			NodeStartupTimeoutSeconds: ptr.To[int32](600),
			UnhealthyNodeConditions:   unhealthyNodeConditions(300),
		},
	}
}

// unhealthyNodeConditions: a node not Ready (False or Unknown) for seconds is replaced.
func unhealthyNodeConditions(seconds int32) []clusterv1.UnhealthyNodeCondition {
	return []clusterv1.UnhealthyNodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To(seconds)},
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To(seconds)},
	}
}

func ref(apiVersion, kind, name string) clusterv1.ClusterClassTemplateReference {
	return clusterv1.ClusterClassTemplateReference{APIVersion: apiVersion, Kind: kind, Name: name}
}

// topology pairs the Cluster's topology entries with the node groups they come from.
type topology struct {
	controlPlane NodeGroup
	// workers are in the order of c.Spec.Topology.Workers.MachineDeployments.
	workers []NodeGroup
}

func clusterObject(in Input, className, version string, network clusterNetwork) (*clusterv1.Cluster, topology, error) {
	var controlPlane *NodeGroup
	var workers []NodeGroup
	for i := range in.NodeGroups {
		if err := validateNodeGroupNodes(in.NodeGroups[i]); err != nil {
			return nil, topology{}, err
		}
		if in.NodeGroups[i].IsControlPlane() {
			if controlPlane != nil {
				return nil, topology{}, fmt.Errorf("cluster has more than one control-plane node group (%s, %s)", controlPlane.Name, in.NodeGroups[i].Name)
			}
			controlPlane = &in.NodeGroups[i]
			continue
		}
		workers = append(workers, in.NodeGroups[i])
	}
	if controlPlane == nil {
		return nil, topology{}, fmt.Errorf("cluster has no control-plane node group")
	}
	// Default groups first, then by name: a stable order keeps server-side apply from reordering.
	sort.SliceStable(workers, func(i, j int) bool {
		if workers[i].IsDefault != workers[j].IsDefault {
			return workers[i].IsDefault
		}
		return workers[i].Name < workers[j].Name
	})
	name := cmp.Or(in.Cluster.AdoptedName, ClusterName(in.Cluster.Name, in.Cluster.UUID))
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: in.Namespace,
			Labels: map[string]string{
				LabelManagedBy: ManagedByValue, LabelClusterUUID: in.Cluster.UUID,
				LabelProjectID: in.Cluster.ProjectID, LabelTemplateUUID: in.Template.UUID,
			},
			Annotations: map[string]string{AnnotationName: in.Cluster.Name},
		},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{network.Pods.String()}},
				Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{network.Services.String()}},
				ServiceDomain: network.ServiceDomain,
			},
			Topology: clusterv1.Topology{
				ClassRef:     clusterv1.ClusterClassRef{Name: className},
				Version:      version,
				ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To(int32(controlPlane.NodeCount))},
			},
		},
	}
	if in.RenderedBy != "" {
		c.Annotations[AnnotationRenderedBy] = in.RenderedBy
	}
	autoscale := LabelEnabled(in.Cluster.Labels, LabelAutoScalingEnabled)
	for _, ng := range workers {
		md := clusterv1.MachineDeploymentTopology{
			Class: WorkerClass,
			Name:  MachineDeploymentName(ng),
			Metadata: clusterv1.ObjectMeta{
				Labels:      map[string]string{LabelNodeGroupUUID: ng.UUID},
				Annotations: map[string]string{AnnotationNGName: ng.Name},
			},
		}
		// Only when set: the class's own health check keeps its default otherwise.
		if v, set := in.Cluster.Labels[LabelAutoHealingNodeTimeout]; set && LabelEnabled(in.Cluster.Labels, LabelAutoHealingEnabled) {
			if t, err := strconv.Atoi(v); err == nil && t > 0 {
				md.HealthCheck.Checks.UnhealthyNodeConditions = unhealthyNodeConditions(int32(t))
			}
		}
		lo, hi, err := autoscalingBounds(in.Cluster.Labels, ng)
		if err != nil {
			return nil, topology{}, err
		}
		if autoscale && hi != nil {
			// Replicas stay unset so the autoscaler owns them; CAPI starts the group at the minimum.
			md.Metadata.Annotations[AutoscalerMinAnnotation] = strconv.Itoa(lo)
			md.Metadata.Annotations[AutoscalerMaxAnnotation] = strconv.Itoa(*hi)
		} else {
			md.Replicas = ptr.To(int32(ng.NodeCount))
		}
		if in.UpgradeCovers(ng) {
			md.Rollout = upgradeRollout(*in.Upgrade)
		}
		c.Spec.Topology.Workers.MachineDeployments = append(c.Spec.Topology.Workers.MachineDeployments, md)
	}
	return c, topology{controlPlane: *controlPlane, workers: workers}, nil
}

// MergeLabels returns a copy of a with the entries of b added or replaced.
func MergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// autoscalingBounds are a worker group's autoscaling bounds: its own min/max_node_count, and for the
// default worker group the min_node_count/max_node_count labels where the group has none (Magnum
// leaves the default group's bounds unset and the anchors read the labels).
func autoscalingBounds(labels map[string]string, ng NodeGroup) (lo int, hi *int, err error) {
	lo, hi = ng.MinNodeCount, ng.MaxNodeCount
	if ng.IsDefault {
		if lo == 0 && labelSet(labels, LabelMinNodeCount) {
			lo = labelInt(labels, LabelMinNodeCount)
		}
		if hi == nil && labelSet(labels, LabelMaxNodeCount) {
			n := labelInt(labels, LabelMaxNodeCount)
			hi = &n
		}
	}
	if hi != nil && lo > *hi {
		return 0, nil, &LabelError{Label: LabelMinNodeCount, Value: strconv.Itoa(lo),
			Reason: fmt.Sprintf("node group %s: the minimum is above the maximum %d", ng.Name, *hi)}
	}
	return lo, hi, nil
}
