package capi

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// What adoption reads and changes of a cluster another driver built (templates.LiveCluster): the
// objects its Cluster, control plane and MachineDeployments reference, read from the apiserver
// itself, in the versions the bridge's class copies them into.

// ReadLive reads the live objects of the Cluster namespace/name; found is false when the Cluster
// does not exist. The workers' node groups are left for the caller to tell (NodeGroupUUID empty).
func (c *Client) ReadLive(ctx context.Context, namespace, name string) (live templates.LiveCluster, found bool, err error) {
	cl, found, err := c.GetCluster(ctx, namespace, name)
	if err != nil || !found {
		return live, found, err
	}
	live.Cluster = cl
	get := func(apiVersion, kind, name string, required bool) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
		switch {
		case apierrors.IsNotFound(err) && !required:
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, err)
		}
		return u, nil
	}
	want := func(ref clusterv1.ContractVersionedObjectReference, group, kind, what string) error {
		if ref.APIGroup != group || ref.Kind != kind {
			return fmt.Errorf("%s of Cluster %s/%s is a %s.%s, not a %s.%s: only Cluster API's kubeadm and OpenStack providers can be adopted",
				what, namespace, name, ref.Kind, ref.APIGroup, kind, group)
		}
		return nil
	}
	const capo, kcp, cabpk = "infrastructure.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io"
	if err := want(cl.Spec.InfrastructureRef, capo, "OpenStackCluster", "the infrastructure"); err != nil {
		return live, true, err
	}
	if err := want(cl.Spec.ControlPlaneRef, kcp, "KubeadmControlPlane", "the control plane"); err != nil {
		return live, true, err
	}
	if live.InfrastructureCluster, err = get(templates.CAPOGroupVersion, "OpenStackCluster", cl.Spec.InfrastructureRef.Name, true); err != nil {
		return live, true, err
	}
	if live.ControlPlane, err = get(templates.ControlPlaneGroupVersion, "KubeadmControlPlane", cl.Spec.ControlPlaneRef.Name, true); err != nil {
		return live, true, err
	}
	var cpMachines clusterv1.ContractVersionedObjectReference
	if err := fromField(live.ControlPlane, &cpMachines, "spec", "machineTemplate", "spec", "infrastructureRef"); err != nil {
		return live, true, err
	}
	if err := want(cpMachines, capo, "OpenStackMachineTemplate", "the control plane's machine template"); err != nil {
		return live, true, err
	}
	if live.ControlPlaneMachines, err = get(templates.CAPOGroupVersion, "OpenStackMachineTemplate", cpMachines.Name, true); err != nil {
		return live, true, err
	}
	mhc := clusterv1.GroupVersion.String()
	if live.ControlPlaneHealthCheck, err = get(mhc, "MachineHealthCheck", live.ControlPlane.GetName(), false); err != nil {
		return live, true, err
	}
	var mds clusterv1.MachineDeploymentList
	if err := c.List(ctx, &mds, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return live, true, err
	}
	sort.Slice(mds.Items, func(i, j int) bool { return mds.Items[i].Name < mds.Items[j].Name })
	for i := range mds.Items {
		md := &mds.Items[i]
		w := templates.LiveWorker{}
		if w.MachineDeployment, err = get(clusterv1.GroupVersion.String(), "MachineDeployment", md.Name, true); err != nil {
			return live, true, err
		}
		boot, infra := md.Spec.Template.Spec.Bootstrap.ConfigRef, md.Spec.Template.Spec.InfrastructureRef
		if err := want(boot, cabpk, "KubeadmConfigTemplate", "the bootstrap template of MachineDeployment "+md.Name); err != nil {
			return live, true, err
		}
		if err := want(infra, capo, "OpenStackMachineTemplate", "the machine template of MachineDeployment "+md.Name); err != nil {
			return live, true, err
		}
		if w.Bootstrap, err = get(templates.BootstrapGroupVersion, "KubeadmConfigTemplate", boot.Name, true); err != nil {
			return live, true, err
		}
		if w.Infrastructure, err = get(templates.CAPOGroupVersion, "OpenStackMachineTemplate", infra.Name, true); err != nil {
			return live, true, err
		}
		if w.HealthCheck, err = get(mhc, "MachineHealthCheck", md.Name, false); err != nil {
			return live, true, err
		}
		own := client.MatchingLabels{clusterv1.ClusterNameLabel: name, clusterv1.MachineDeploymentNameLabel: md.Name}
		var sets clusterv1.MachineSetList
		if err := c.List(ctx, &sets, client.InNamespace(namespace), own); err != nil {
			return live, true, err
		}
		for _, ms := range sets.Items {
			w.MachineSets = append(w.MachineSets, ms.Name)
		}
		var machines clusterv1.MachineList
		if err := c.List(ctx, &machines, client.InNamespace(namespace), own); err != nil {
			return live, true, err
		}
		for _, m := range machines.Items {
			w.Machines = append(w.Machines, m.Name)
		}
		sort.Strings(w.MachineSets)
		sort.Strings(w.Machines)
		live.Workers = append(live.Workers, w)
	}
	return live, true, nil
}

func fromField(u *unstructured.Unstructured, into any, fields ...string) error {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if err != nil || !found {
		return fmt.Errorf("%s %s has no %v", u.GetKind(), u.GetName(), fields)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// LabelObjects adds labels to objects of the namespace (and drops their field managers when told).
func (c *Client) LabelObjects(ctx context.Context, namespace string, objs []templates.ObjectLabels) error {
	for _, o := range objs {
		meta := map[string]any{"labels": o.Labels}
		if len(o.Annotations) > 0 {
			meta["annotations"] = o.Annotations
		}
		if o.Disown {
			meta["managedFields"] = []any{map[string]any{}} // the apiserver's way to drop every manager
		}
		patch, err := json.Marshal(map[string]any{"metadata": meta})
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.APIVersion)
		u.SetKind(o.Kind)
		u.SetNamespace(namespace)
		u.SetName(o.Name)
		if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("labelling %s %s/%s: %w", o.Kind, namespace, o.Name, err)
		}
	}
	return nil
}

// Helm records a release in Secrets labelled owner=helm and name=<release>; the Cluster it
// installed carries Helm's ownership annotations, without which Helm refuses to install over it.
const (
	helmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	helmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

// RetireHelmRelease makes Helm forget a release without uninstalling it: its release Secrets go
// (`helm uninstall` then finds nothing to delete) and the Cluster loses Helm's ownership
// annotations (so no `helm install` of the same name takes it over again).
func (c *Client) RetireHelmRelease(ctx context.Context, namespace, release, clusterName string) error {
	if err := client.IgnoreNotFound(c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(namespace),
		client.MatchingLabels{"owner": "helm", "name": release})); err != nil {
		return fmt.Errorf("deleting the Helm release Secrets of %s/%s: %w", namespace, release, err)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + helmReleaseNameAnnotation + `":null,"` + helmReleaseNamespaceAnnotation + `":null}}}`)
	cl := &clusterv1.Cluster{}
	cl.Namespace, cl.Name = namespace, clusterName
	if err := client.IgnoreNotFound(c.Patch(ctx, cl, client.RawPatch(types.MergePatchType, patch))); err != nil {
		return fmt.Errorf("removing Helm's ownership of Cluster %s/%s: %w", namespace, clusterName, err)
	}
	return nil
}

// NamespaceManaged reports whether the namespace exists and is one of the bridge's project
// namespaces; the bridge writes in no other (its admission policy refuses it).
func (c *Client) NamespaceManaged(ctx context.Context, name string) (exists, managed bool, err error) {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.MatchingFields{"metadata.name": name}); err != nil {
		return false, false, err
	}
	if len(list.Items) == 0 {
		return false, false, nil
	}
	return true, list.Items[0].Labels[templates.LabelManagedBy] == templates.ManagedByValue, nil
}

// EnsureSecretAccess binds the bridge's Secret reader role to itself in a namespace it did not make
// (one handed over to it, as magnum-cluster-api's), without the project namespace's policies and
// quota, which are not the bridge's to impose there; it returns once the binding is in force.
func (c *Client) EnsureSecretAccess(ctx context.Context, namespace string) error {
	rb, err := c.secretReader(ctx, namespace)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, rb); err != nil {
		return err
	}
	return c.waitSecretAccess(ctx, namespace)
}

// DeleteLeftovers deletes, by name, the ClusterResourceSets and Secrets another driver made beside
// a cluster; names that do not exist are fine. The bridge's role deletes these by collection only,
// so each name is a field selector.
func (c *Client) DeleteLeftovers(ctx context.Context, namespace string, left templates.ClusterAPILeftovers) error {
	for _, name := range left.ResourceSets {
		list := &unstructured.Unstructured{}
		list.SetGroupVersionKind(resourceSetGVK)
		if err := client.IgnoreNotFound(c.DeleteAllOf(ctx, list, client.InNamespace(namespace), client.MatchingFields{"metadata.name": name})); err != nil {
			return fmt.Errorf("deleting ClusterResourceSet %s/%s: %w", namespace, name, err)
		}
	}
	for _, name := range left.Secrets {
		if err := client.IgnoreNotFound(c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(namespace), client.MatchingFields{"metadata.name": name})); err != nil {
			return fmt.Errorf("deleting Secret %s/%s: %w", namespace, name, err)
		}
	}
	return nil
}
