package templates

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A cluster another driver built without a ClusterClass (magnum-capi-helm's Helm chart) is taken
// over by giving it a ClusterClass of its own whose templates are copies of its live objects: the
// topology then renders exactly what runs, and no machine is replaced. Cluster API allows a Cluster
// to gain a topology only with its unsafe class-name annotation, which is what the copy is for.
//
// The copy keeps the other driver's kubeadm configuration, network and load balancer for good:
// OpenStackCluster fields are immutable, and a different kubeadm configuration would roll the
// control plane. Patches of the bridge's class apply only where they cannot change a live object:
// the credential (identityRef may change), the machine image (so an upgrade changes it) and, for
// node groups made after the adoption, everything — those use the bridge's own worker class.

// AnnotationAdoptedFrom marks a Cluster the bridge took over; the value names the driver that built it.
const AnnotationAdoptedFrom = "magnum.openstack.org/adopted-from"

// adoptedWorkerClassPrefix starts the worker classes copied from live MachineDeployments.
const adoptedWorkerClassPrefix = "adopted-"

// AdoptedClassName is the ClusterClass of an adopted cluster.
func AdoptedClassName(clusterName string) string { return clusterName + "-adopted" }

// IsAdopted reports whether the live Cluster was taken over from another driver.
func IsAdopted(c *clusterv1.Cluster) bool {
	_, ok := c.Annotations[AnnotationAdoptedFrom]
	return ok
}

// LiveCluster is what the management cluster holds of a cluster to adopt, as read from the
// apiserver (Cluster API objects in v1beta2, CAPO's in v1beta1).
type LiveCluster struct {
	// Driver is the driver that built it (recorded in AnnotationAdoptedFrom).
	Driver                string
	Cluster               *clusterv1.Cluster
	InfrastructureCluster *unstructured.Unstructured // OpenStackCluster
	ControlPlane          *unstructured.Unstructured // KubeadmControlPlane
	// ControlPlaneMachines is the OpenStackMachineTemplate the control plane's machines are made from.
	ControlPlaneMachines *unstructured.Unstructured
	// ControlPlaneHealthCheck is the MachineHealthCheck named like the control plane (nil: none).
	ControlPlaneHealthCheck *unstructured.Unstructured
	Workers                 []LiveWorker
}

// LiveWorker is one live MachineDeployment and what its machines are made from.
type LiveWorker struct {
	// NodeGroupUUID is the Magnum node group the MachineDeployment is.
	NodeGroupUUID     string
	MachineDeployment *unstructured.Unstructured
	Bootstrap         *unstructured.Unstructured // KubeadmConfigTemplate
	Infrastructure    *unstructured.Unstructured // OpenStackMachineTemplate
	// HealthCheck is the MachineHealthCheck named like the MachineDeployment (nil: none).
	HealthCheck *unstructured.Unstructured
	// MachineSets and Machines are the names of the MachineDeployment's.
	MachineSets, Machines []string
}

// ObjectLabels are labels a live object needs before the topology is applied.
type ObjectLabels struct {
	APIVersion, Kind, Name string
	Labels                 map[string]string
	// Annotations are added too (nil: none).
	Annotations map[string]string
	// Disown drops the object's field managers, so that the topology becomes the one owner of
	// what it sets. Server-side apply removes only fields no manager owns any more: without it a
	// machine template's image, set by id by the old driver, would keep its id next to the name
	// filter an upgrade sets, which CAPO refuses.
	Disown bool
}

// Adopt turns a rendering of the cluster's rows into the rendering of the live cluster: its class
// becomes a copy of the live objects (AdoptedClassName), its version, network and machine image
// those it runs, and each live MachineDeployment the topology entry of its node group. It returns
// the labels the live objects need before the topology is applied: Cluster API's topology
// controller takes over only objects labelled as its own, and finds a MachineDeployment by its
// topology name.
func (r *Rendered) Adopt(live LiveCluster) ([]ObjectLabels, error) {
	if r.Flavor != FlavorOpenStack {
		return nil, fmt.Errorf("only OpenStack clusters can be adopted, not %s ones", r.Flavor)
	}
	lc := live.Cluster
	if lc.Spec.Topology.IsDefined() {
		return nil, fmt.Errorf("Cluster %s already has a topology (class %s)", lc.Name, lc.Spec.Topology.ClassRef.Name)
	}
	var c clusterv1.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &c); err != nil {
		return nil, fmt.Errorf("the rendered Cluster %s: %w", r.Cluster.GetName(), err)
	}
	if c.Name != lc.Name {
		return nil, fmt.Errorf("the rendering names the Cluster %s, the live one is %s", c.Name, lc.Name)
	}
	version, _, _ := unstructured.NestedString(live.ControlPlane.Object, "spec", "version")
	if version == "" {
		return nil, fmt.Errorf("KubeadmControlPlane %s has no version", live.ControlPlane.GetName())
	}
	cpImage, err := machineImage(live.ControlPlaneMachines)
	if err != nil {
		return nil, err
	}
	className := AdoptedClassName(lc.Name)
	byGroup := map[string]LiveWorker{}
	for _, w := range live.Workers {
		if mdVersion, _, _ := unstructured.NestedString(w.MachineDeployment.Object, "spec", "template", "spec", "version"); mdVersion != version {
			return nil, fmt.Errorf("MachineDeployment %s runs %s, the control plane %s: adopt it once the upgrade has ended", w.MachineDeployment.GetName(), mdVersion, version)
		}
		byGroup[w.NodeGroupUUID] = w
	}

	t := &c.Spec.Topology
	t.ClassRef = clusterv1.ClusterClassRef{Name: className}
	t.Version = version
	c.Spec.ClusterNetwork = lc.Spec.ClusterNetwork
	setVariable(&t.Variables, VarMachineImage, cpImage)
	// The live control plane keeps the health check it has (the class's copy, if any).
	t.ControlPlane.HealthCheck = clusterv1.ControlPlaneTopologyHealthCheck{}
	c.Annotations = MergeLabels(c.Annotations, map[string]string{
		AnnotationAdoptedFrom: live.Driver,
		clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation: "",
	})
	owned := map[string]string{clusterv1.ClusterTopologyOwnedLabel: ""}
	own := func(o *unstructured.Unstructured, extra map[string]string) ObjectLabels {
		return ObjectLabels{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), Labels: MergeLabels(owned, extra)}
	}
	disowned := func(o ObjectLabels) ObjectLabels { o.Disown = true; return o }
	labels := []ObjectLabels{own(live.InfrastructureCluster, nil), own(live.ControlPlane, nil), disowned(own(live.ControlPlaneMachines, nil))}
	var workers []adoptedWorker
	for i := range t.Workers.MachineDeployments {
		md := &t.Workers.MachineDeployments[i]
		w, ok := byGroup[md.Metadata.Labels[LabelNodeGroupUUID]]
		if !ok {
			continue // a node group with no machines yet: made with the bridge's worker class
		}
		delete(byGroup, md.Metadata.Labels[LabelNodeGroupUUID])
		image, err := machineImage(w.Infrastructure)
		if err != nil {
			return nil, err
		}
		md.Class = adoptedWorkerClassPrefix + md.Name
		md.Variables.Overrides = nil
		if !jsonEqual(image, cpImage) {
			setVariable(&md.Variables.Overrides, VarMachineImage, image)
		}
		md.HealthCheck = clusterv1.MachineDeploymentTopologyHealthCheck{}
		md.FailureDomain, _, _ = unstructured.NestedString(w.MachineDeployment.Object, "spec", "template", "spec", "failureDomain")
		workers = append(workers, adoptedWorker{class: md.Class, live: w})
		// The topology's selector is (cluster, owned, topology name): the MachineSets and Machines
		// carry those labels before it is in force, or the MachineSets would count no machine and
		// create new ones.
		topologyName := map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: md.Name}
		labels = append(labels, own(w.MachineDeployment, topologyName), own(w.Bootstrap, nil), disowned(own(w.Infrastructure, nil)))
		for _, name := range w.MachineSets {
			labels = append(labels, ObjectLabels{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: name, Labels: MergeLabels(owned, topologyName)})
		}
		for _, name := range w.Machines {
			labels = append(labels, ObjectLabels{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, Labels: MergeLabels(owned, topologyName)})
		}
	}
	for id, w := range byGroup {
		return nil, fmt.Errorf("MachineDeployment %s is node group %s, which the cluster's rows do not hold (being deleted?)", w.MachineDeployment.GetName(), id)
	}
	class, err := adoptedClass(className, live, workers)
	if err != nil {
		return nil, err
	}
	for _, o := range class {
		o.SetNamespace(lc.Namespace)
		o.SetLabels(MergeLabels(o.GetLabels(), map[string]string{LabelManagedBy: ManagedByValue, LabelClusterUUID: c.Labels[LabelClusterUUID]}))
	}
	if r.Cluster, err = toUnstructured(&c, r.Cluster.GetAPIVersion(), r.Cluster.GetKind()); err != nil {
		return nil, err
	}
	r.ClassName, r.ClassObjects, r.Version = className, class, version
	r.ServerGroups = bridgeServerGroups(&c, r.ServerGroups)
	return labels, nil
}

// KeepAdopted gives an upgrade's fresh rendering of an adopted cluster the class it has: the
// version and the variables (the new image) are the rendering's, each live node group keeps its
// copied worker class and health check, and the class objects are not applied again.
func (r *Rendered) KeepAdopted(live *clusterv1.Cluster) error {
	var c clusterv1.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &c); err != nil {
		return fmt.Errorf("the rendered Cluster %s: %w", r.Cluster.GetName(), err)
	}
	t, lt := &c.Spec.Topology, &live.Spec.Topology
	t.ClassRef = lt.ClassRef
	t.ControlPlane.HealthCheck = lt.ControlPlane.HealthCheck
	c.Spec.ClusterNetwork = live.Spec.ClusterNetwork
	c.Annotations = MergeLabels(c.Annotations, map[string]string{AnnotationAdoptedFrom: live.Annotations[AnnotationAdoptedFrom]})
	for i := range t.Workers.MachineDeployments {
		md := &t.Workers.MachineDeployments[i]
		for _, old := range lt.Workers.MachineDeployments {
			if old.Name == md.Name && strings.HasPrefix(old.Class, adoptedWorkerClassPrefix) {
				md.Class, md.HealthCheck, md.FailureDomain = old.Class, old.HealthCheck, old.FailureDomain
				break
			}
		}
	}
	kept, err := toUnstructured(&c, r.Cluster.GetAPIVersion(), r.Cluster.GetKind())
	if err != nil {
		return err
	}
	r.Cluster, r.ClassName, r.ClassObjects = kept, lt.ClassRef.Name, nil
	r.ServerGroups = bridgeServerGroups(&c, r.ServerGroups)
	return nil
}

// bridgeServerGroups keeps the server groups of the node groups on the bridge's worker class: the
// copied control plane and workers never had one and name none.
func bridgeServerGroups(c *clusterv1.Cluster, groups []ServerGroup) []ServerGroup {
	if !IsAdopted(c) {
		return groups
	}
	keep := map[string]bool{}
	for _, md := range c.Spec.Topology.Workers.MachineDeployments {
		if md.Class == WorkerClass {
			keep[serverGroupName(c.Name, md.Name)] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(groups), func(g ServerGroup) bool { return !keep[g.Name] })
}

type adoptedWorker struct {
	class string
	live  LiveWorker
}

// machineImage is the image of an OpenStackMachineTemplate, in the form the machineImage variable takes.
func machineImage(osmt *unstructured.Unstructured) (map[string]any, error) {
	image, found, err := unstructured.NestedMap(osmt.Object, "spec", "template", "spec", "image")
	if err != nil || !found {
		return nil, fmt.Errorf("OpenStackMachineTemplate %s names no image", osmt.GetName())
	}
	if _, byRef := image["imageRef"]; byRef || len(image) != 1 {
		return nil, fmt.Errorf("OpenStackMachineTemplate %s names its image by %v: only an id or a name filter can be adopted", osmt.GetName(), slices.Sorted(maps.Keys(image)))
	}
	return image, nil
}

func setVariable(vars *[]clusterv1.ClusterVariable, name string, v any) {
	raw, err := jsonValue(v)
	if err != nil {
		panic(fmt.Sprintf("templates: variable %s: %v", name, err)) // values read from JSON objects marshal
	}
	for i := range *vars {
		if (*vars)[i].Name == name {
			(*vars)[i].Value = raw
			return
		}
	}
	*vars = append(*vars, clusterv1.ClusterVariable{Name: name, Value: raw})
	slices.SortFunc(*vars, func(a, b clusterv1.ClusterVariable) int { return strings.Compare(a.Name, b.Name) })
}

// templateOf is a template of kind named name whose spec.template is the given one (a live
// object's spec wrapped as {"spec": …}, or a live template's own spec.template).
func templateOf(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	return obj(apiVersion, kind, name, map[string]any{"template": spec})
}

func specWithout(o *unstructured.Unstructured, drop ...[]string) (map[string]any, error) {
	spec, found, err := unstructured.NestedMap(o.Object, "spec")
	if err != nil || !found {
		return nil, fmt.Errorf("%s %s has no spec", o.GetKind(), o.GetName())
	}
	for _, path := range drop {
		unstructured.RemoveNestedField(spec, path...)
	}
	return spec, nil
}

func liveTemplate(o *unstructured.Unstructured) (map[string]any, error) {
	t, found, err := unstructured.NestedMap(o.Object, "spec", "template")
	if err != nil || !found {
		return nil, fmt.Errorf("%s %s has no spec.template", o.GetKind(), o.GetName())
	}
	return t, nil
}

// adoptedClass is the adopted cluster's ClusterClass and templates: copies of the live objects, the
// bridge's worker class for node groups made later, the bridge's variables and the patches that
// cannot change a live object (adoptedPatches).
func adoptedClass(name string, live LiveCluster, workers []adoptedWorker) ([]*unstructured.Unstructured, error) {
	infra, err := specWithout(live.InfrastructureCluster, []string{"controlPlaneEndpoint"})
	if err != nil {
		return nil, err
	}
	cp, err := specWithout(live.ControlPlane, []string{"replicas"}, []string{"version"},
		[]string{"machineTemplate", "spec", "infrastructureRef"}, []string{"machineTemplate", "spec", "readinessGates"})
	if err != nil {
		return nil, err
	}
	cpMachines, err := liveTemplate(live.ControlPlaneMachines)
	if err != nil {
		return nil, err
	}
	objs := []*unstructured.Unstructured{
		templateOf(CAPOGroupVersion, "OpenStackClusterTemplate", name+"-cluster", map[string]any{"spec": infra}),
		templateOf(ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate", name+"-control-plane", map[string]any{"spec": cp}),
		templateOf(CAPOGroupVersion, "OpenStackMachineTemplate", name+"-control-plane-machine", cpMachines),
	}
	// The bridge's own worker templates, for node groups created after the adoption.
	bridge, err := openStackClass()
	if err != nil {
		return nil, err
	}
	var bridgeClass clusterv1.ClusterClass
	for _, o := range bridge {
		switch o.GetKind() {
		case "ClusterClass":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &bridgeClass); err != nil {
				return nil, err
			}
		case "OpenStackMachineTemplate", "KubeadmConfigTemplate":
			replacePlaceholder(o.Object, name)
			o.SetName(strings.Replace(o.GetName(), classPlaceholder, name, 1))
			objs = append(objs, o)
		}
	}
	bridgeWorker := bridgeClass.Spec.Workers.MachineDeployments[0]
	replaceRefName := func(r *clusterv1.ClusterClassTemplateReference) {
		r.Name = strings.Replace(r.Name, classPlaceholder, name, 1)
	}
	replaceRefName(&bridgeWorker.Bootstrap.TemplateRef)
	replaceRefName(&bridgeWorker.Infrastructure.TemplateRef)

	cc := &clusterv1.ClusterClass{Spec: clusterv1.ClusterClassSpec{
		Infrastructure: clusterv1.InfrastructureClass{TemplateRef: ref(CAPOGroupVersion, "OpenStackClusterTemplate", name+"-cluster")},
		ControlPlane: clusterv1.ControlPlaneClass{
			TemplateRef: ref(ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate", name+"-control-plane"),
			MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{
				TemplateRef: ref(CAPOGroupVersion, "OpenStackMachineTemplate", name+"-control-plane-machine")},
		},
		Workers:   clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{bridgeWorker}},
		Variables: openStackVariables(),
	}}
	if err := copyHealthCheck(live.ControlPlaneHealthCheck, &cc.Spec.ControlPlane.HealthCheck); err != nil {
		return nil, err
	}
	classes := []string{WorkerClass}
	for _, w := range workers {
		bootstrap, err := liveTemplate(w.live.Bootstrap)
		if err != nil {
			return nil, err
		}
		machines, err := liveTemplate(w.live.Infrastructure)
		if err != nil {
			return nil, err
		}
		prefix := name + "-" + strings.TrimPrefix(w.class, adoptedWorkerClassPrefix)
		objs = append(objs,
			templateOf(BootstrapGroupVersion, "KubeadmConfigTemplate", prefix+"-bootstrap", bootstrap),
			templateOf(CAPOGroupVersion, "OpenStackMachineTemplate", prefix+"-machine", machines))
		mdc := clusterv1.MachineDeploymentClass{
			Class:          w.class,
			Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref(BootstrapGroupVersion, "KubeadmConfigTemplate", prefix+"-bootstrap")},
			Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref(CAPOGroupVersion, "OpenStackMachineTemplate", prefix+"-machine")},
		}
		if err := copyHealthCheck(w.live.HealthCheck, &mdc.HealthCheck); err != nil {
			return nil, err
		}
		cc.Spec.Workers.MachineDeployments = append(cc.Spec.Workers.MachineDeployments, mdc)
		classes = append(classes, w.class)
	}
	cc.Spec.Patches = adoptedPatches(classes)
	class, err := toUnstructured(cc, clusterv1.GroupVersion.String(), "ClusterClass")
	if err != nil {
		return nil, err
	}
	class.SetName(name)
	return append(objs, class), nil
}

// copyHealthCheck copies a live MachineHealthCheck's checks and remediation into a class's health
// check (the same fields): the topology's MachineHealthCheck has the live one's name, so without
// the copy Cluster API would delete it. A nil check leaves into empty.
func copyHealthCheck(mhc *unstructured.Unstructured, into any) error {
	if mhc == nil {
		return nil
	}
	hc := map[string]any{}
	for _, k := range []string{"checks", "remediation"} {
		if v, found, _ := unstructured.NestedFieldCopy(mhc.Object, "spec", k); found {
			hc[k] = v
		}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(hc, into); err != nil {
		return fmt.Errorf("MachineHealthCheck %s: %w", mhc.GetName(), err)
	}
	return nil
}

// adoptedPatches are the bridge's patches an adopted class keeps: on the copied objects only the
// credential (identity) and the machine image; on the bridge's worker class (workerClasses[0])
// every machine and bootstrap patch, as in the bridge's own class.
func adoptedPatches(workerClasses []string) []clusterv1.ClusterClassPatch {
	var out []clusterv1.ClusterClassPatch
	for _, p := range openStackPatches() {
		var defs []clusterv1.PatchDefinition
		for _, d := range p.Definitions {
			m := &d.Selector.MatchResources
			switch {
			case ptr.Deref(m.InfrastructureCluster, false):
				if p.Name != "identity" {
					continue
				}
			case d.Selector.Kind == "KubeadmControlPlaneTemplate":
				continue
			case d.Selector.Kind == "OpenStackMachineTemplate" && p.Name == "machine-image":
				m.MachineDeploymentClass = &clusterv1.PatchSelectorMatchMachineDeploymentClass{Names: slices.Clone(workerClasses)}
			default:
				m.ControlPlane = nil
			}
			defs = append(defs, d)
		}
		if len(defs) > 0 {
			p.Definitions = defs
			out = append(out, p)
		}
	}
	return out
}
