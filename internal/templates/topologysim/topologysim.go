// Package topologysim computes, without a management cluster, the objects Cluster API's topology
// controller would derive from a rendered Cluster and its ClusterClass: it builds the desired state
// from the class's templates and runs CAPI's own ClusterClass patch engine (the code the topology
// controller runs, variables, enabledIf and JSON patches included) over it. Tests use it to see what
// a label finally changes in an OpenStackCluster, OpenStackMachineTemplate or KubeadmControlPlane,
// and to dry-run those objects against the real CRDs and webhooks.
package topologysim

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster/patches"
	"sigs.k8s.io/cluster-api/exp/topology/scope"
)

// Desired is what the topology controller would create for a Cluster.
type Desired struct {
	// InfrastructureCluster is e.g. the OpenStackCluster.
	InfrastructureCluster *unstructured.Unstructured
	// ControlPlane is the KubeadmControlPlane.
	ControlPlane *unstructured.Unstructured
	// ControlPlaneMachineTemplate is the control plane's infrastructure machine template.
	ControlPlaneMachineTemplate *unstructured.Unstructured
	// MachineDeployments are keyed by topology name.
	MachineDeployments map[string]MachineDeployment
}

// MachineDeployment is the desired state of one MachineDeployment topology.
type MachineDeployment struct {
	Object                        *clusterv1.MachineDeployment
	BootstrapTemplate             *unstructured.Unstructured
	InfrastructureMachineTemplate *unstructured.Unstructured
}

// Objects lists every desired object (MachineDeployments in topology-name order).
func (d *Desired) Objects() []*unstructured.Unstructured {
	out := []*unstructured.Unstructured{d.InfrastructureCluster, d.ControlPlane, d.ControlPlaneMachineTemplate}
	for _, name := range sortedKeys(d.MachineDeployments) {
		md := d.MachineDeployments[name]
		out = append(out, md.BootstrapTemplate, md.InfrastructureMachineTemplate)
	}
	return out
}

func sortedKeys(m map[string]MachineDeployment) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Compute applies the class's patches for the cluster and returns the desired objects.
func Compute(ctx context.Context, classObjects []*unstructured.Unstructured, clusterObj *unstructured.Unstructured) (*Desired, error) {
	var cluster clusterv1.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(clusterObj.Object, &cluster); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	byName := map[string]*unstructured.Unstructured{}
	var class *clusterv1.ClusterClass
	for _, o := range classObjects {
		if o.GetKind() == "ClusterClass" {
			class = &clusterv1.ClusterClass{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, class); err != nil {
				return nil, fmt.Errorf("cluster class: %w", err)
			}
			continue
		}
		byName[o.GetKind()+"/"+o.GetName()] = o
	}
	if class == nil {
		return nil, fmt.Errorf("no ClusterClass among the class objects")
	}
	if class.Name != cluster.Spec.Topology.ClassRef.Name {
		return nil, fmt.Errorf("cluster uses class %q, the objects hold %q", cluster.Spec.Topology.ClassRef.Name, class.Name)
	}
	template := func(ref clusterv1.ClusterClassTemplateReference) (*unstructured.Unstructured, error) {
		t, ok := byName[ref.Kind+"/"+ref.Name]
		if !ok {
			return nil, fmt.Errorf("class template %s %s not among the class objects", ref.Kind, ref.Name)
		}
		if t.GetAPIVersion() != ref.APIVersion {
			return nil, fmt.Errorf("class template %s %s is %s, the class references %s", ref.Kind, ref.Name, t.GetAPIVersion(), ref.APIVersion)
		}
		return t.DeepCopy(), nil
	}

	// The ClusterClass controller publishes the variables in status; the engine reads them there.
	for _, v := range class.Spec.Variables {
		class.Status.Variables = append(class.Status.Variables, clusterv1.ClusterClassStatusVariable{
			Name: v.Name,
			Definitions: []clusterv1.ClusterClassStatusVariableDefinition{{
				From: clusterv1.VariableDefinitionFromInline, Required: v.Required, Schema: v.Schema,
			}},
		})
	}

	bp := &scope.ClusterBlueprint{Topology: cluster.Spec.Topology, ClusterClass: class,
		ControlPlane: &scope.ControlPlaneBlueprint{}, MachineDeployments: map[string]*scope.MachineDeploymentBlueprint{}}
	var err error
	if bp.InfrastructureClusterTemplate, err = template(class.Spec.Infrastructure.TemplateRef); err != nil {
		return nil, err
	}
	if bp.ControlPlane.Template, err = template(class.Spec.ControlPlane.TemplateRef); err != nil {
		return nil, err
	}
	if bp.ControlPlane.InfrastructureMachineTemplate, err = template(class.Spec.ControlPlane.MachineInfrastructure.TemplateRef); err != nil {
		return nil, err
	}
	for _, mdc := range class.Spec.Workers.MachineDeployments {
		b := &scope.MachineDeploymentBlueprint{}
		if b.BootstrapTemplate, err = template(mdc.Bootstrap.TemplateRef); err != nil {
			return nil, err
		}
		if b.InfrastructureMachineTemplate, err = template(mdc.Infrastructure.TemplateRef); err != nil {
			return nil, err
		}
		bp.MachineDeployments[mdc.Class] = b
	}

	desired := &scope.ClusterState{Cluster: &cluster, MachineDeployments: scope.MachineDeploymentsStateMap{}}
	desired.InfrastructureCluster = objectFromTemplate(bp.InfrastructureClusterTemplate, cluster.Name, cluster.Namespace)
	cpMachine := copyTemplate(bp.ControlPlane.InfrastructureMachineTemplate, cluster.Name+"-control-plane", cluster.Namespace)
	cp := objectFromTemplate(bp.ControlPlane.Template, cluster.Name, cluster.Namespace)
	if err := unstructured.SetNestedField(cp.Object, cluster.Spec.Topology.Version, "spec", "version"); err != nil {
		return nil, err
	}
	if r := cluster.Spec.Topology.ControlPlane.Replicas; r != nil {
		if err := unstructured.SetNestedField(cp.Object, int64(*r), "spec", "replicas"); err != nil {
			return nil, err
		}
	}
	if err := unstructured.SetNestedMap(cp.Object, map[string]any{
		"apiGroup": cpMachine.GroupVersionKind().Group, "kind": cpMachine.GetKind(), "name": cpMachine.GetName(),
	}, "spec", "machineTemplate", "spec", "infrastructureRef"); err != nil {
		return nil, err
	}
	desired.ControlPlane = &scope.ControlPlaneState{Object: cp, InfrastructureMachineTemplate: cpMachine}
	for _, mdt := range cluster.Spec.Topology.Workers.MachineDeployments {
		b, ok := bp.MachineDeployments[mdt.Class]
		if !ok {
			return nil, fmt.Errorf("machine deployment %s uses class %s the ClusterClass lacks", mdt.Name, mdt.Class)
		}
		name := cluster.Name + "-" + mdt.Name
		md := &clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace,
				Labels: map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: mdt.Name}},
			Spec: clusterv1.MachineDeploymentSpec{ClusterName: cluster.Name, Replicas: mdt.Replicas,
				Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: cluster.Name,
					Version: cluster.Spec.Topology.Version, FailureDomain: mdt.FailureDomain}}},
		}
		desired.MachineDeployments[mdt.Name] = &scope.MachineDeploymentState{
			Object:                        md,
			BootstrapTemplate:             copyTemplate(b.BootstrapTemplate, name+"-bootstrap", cluster.Namespace),
			InfrastructureMachineTemplate: copyTemplate(b.InfrastructureMachineTemplate, name+"-infra", cluster.Namespace),
		}
	}

	// The engine asks the control plane CRD which contract its version implements.
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{
		Name:   "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
		Labels: map[string]string{"cluster.x-k8s.io/v1beta2": cp.GroupVersionKind().Version},
	}}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(crd).Build()
	// The engine logs through controller-runtime's logger; without one in the context it would use
	// (and complain about) the unset global one.
	if _, err := logr.FromContext(ctx); err != nil {
		ctx = logr.NewContext(ctx, logr.Discard())
	}
	if err := patches.NewEngine(c, nil).Apply(ctx, bp, desired); err != nil {
		return nil, err
	}

	out := &Desired{InfrastructureCluster: desired.InfrastructureCluster, ControlPlane: desired.ControlPlane.Object,
		ControlPlaneMachineTemplate: desired.ControlPlane.InfrastructureMachineTemplate, MachineDeployments: map[string]MachineDeployment{}}
	for name, md := range desired.MachineDeployments {
		out.MachineDeployments[name] = MachineDeployment{Object: md.Object, BootstrapTemplate: md.BootstrapTemplate,
			InfrastructureMachineTemplate: md.InfrastructureMachineTemplate}
	}
	return out, nil
}

// objectFromTemplate is the object a template stamps out: kind without "Template", spec from spec.template.spec.
func objectFromTemplate(t *unstructured.Unstructured, name, namespace string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetAPIVersion(t.GetAPIVersion())
	o.SetKind(strings.TrimSuffix(t.GetKind(), "Template"))
	o.SetName(name)
	o.SetNamespace(namespace)
	spec, _, _ := unstructured.NestedMap(t.Object, "spec", "template", "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	o.Object["spec"] = spec
	return o
}

func copyTemplate(t *unstructured.Unstructured, name, namespace string) *unstructured.Unstructured {
	o := t.DeepCopy()
	o.SetName(name)
	o.SetNamespace(namespace)
	o.SetLabels(nil)
	o.SetOwnerReferences(nil)
	o.SetResourceVersion("")
	return o
}
