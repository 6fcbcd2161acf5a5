package capi

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadClusterClass reads a ClusterClass and the templates it names, as the rendering produced them
// (templates.PlanMove compares them with another rendering).
func (c *Client) ReadClusterClass(ctx context.Context, namespace, name string) ([]*unstructured.Unstructured, error) {
	var cc clusterv1.ClusterClass
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cc); err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cc)
	if err != nil {
		return nil, err
	}
	class := &unstructured.Unstructured{Object: m}
	class.SetAPIVersion(clusterv1.GroupVersion.String())
	class.SetKind("ClusterClass")
	out := []*unstructured.Unstructured{class}
	refs := []clusterv1.ClusterClassTemplateReference{cc.Spec.Infrastructure.TemplateRef, cc.Spec.ControlPlane.TemplateRef,
		cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef}
	for _, md := range cc.Spec.Workers.MachineDeployments {
		refs = append(refs, md.Bootstrap.TemplateRef, md.Infrastructure.TemplateRef)
	}
	seen := map[string]bool{}
	for _, ref := range refs {
		key := ref.Kind + "/" + ref.Name
		if ref.Name == "" || seen[key] {
			continue
		}
		seen[key] = true
		t := &unstructured.Unstructured{}
		t.SetAPIVersion(ref.APIVersion)
		t.SetKind(ref.Kind)
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, t); err != nil {
			return nil, fmt.Errorf("%s %s of ClusterClass %s: %w", ref.Kind, ref.Name, name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Machine is a Machine of a cluster and the part of the topology it belongs to.
type Machine struct {
	Name, UID string
	// ControlPlane is true for the control plane's machines; WorkerGroup names the topology's
	// worker group (MachineDeployment) of the others.
	ControlPlane bool
	WorkerGroup  string
}

// Machines lists a cluster's Machines.
func (c *Client) Machines(ctx context.Context, namespace, clusterName string) ([]Machine, error) {
	var list clusterv1.MachineList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName}); err != nil {
		return nil, err
	}
	out := make([]Machine, 0, len(list.Items))
	for _, m := range list.Items {
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		out = append(out, Machine{Name: m.Name, UID: string(m.UID), ControlPlane: cp,
			WorkerGroup: m.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]})
	}
	return out, nil
}
