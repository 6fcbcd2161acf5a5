package templates

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A live cluster keeps the rendering it was built with. Bridges are upgraded far more often than
// clusters, and a bridge may render a template differently from the one that built a cluster; an
// operation that asks for no new machines (a resize, a node group created, changed or deleted, a
// credential rotation, a retry after a restart) must not replace any. The rendering is the
// ClusterClass the Cluster names (classes are named after their content, so a class never changes)
// together with the topology fields that shape the machines. Only an upgrade or an operator's
// deliberate move gives a live cluster the running bridge's rendering.

// AnnotationRenderedBy names the bridge version whose rendering a Cluster uses.
const AnnotationRenderedBy = "magnum.openstack.org/rendered-by"

// Keep gives the rendering the live Cluster's machine-shaping fields: the class, the Kubernetes
// version, the variables and the cluster network, and for each worker group live already has, its
// class, variable overrides and failure domain. What an operation changes (replica counts, node groups
// added or removed, metadata that CAPI propagates in place) stays as rendered; a new node group keeps
// its rendered entry, whose worker class every rendering defines. The class objects are dropped:
// live's class exists and is not applied again.
func (r *Rendered) Keep(live *clusterv1.Cluster) error {
	var c clusterv1.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &c); err != nil {
		return fmt.Errorf("the rendered Cluster %s: %w", r.Cluster.GetName(), err)
	}
	t, lt := &c.Spec.Topology, &live.Spec.Topology
	t.ClassRef = lt.ClassRef
	t.Version = lt.Version
	t.Variables = lt.Variables
	t.ControlPlane.Variables = lt.ControlPlane.Variables
	c.Spec.ClusterNetwork = live.Spec.ClusterNetwork
	if v, ok := live.Annotations[AnnotationRenderedBy]; ok {
		c.Annotations = MergeLabels(c.Annotations, map[string]string{AnnotationRenderedBy: v})
	} else {
		delete(c.Annotations, AnnotationRenderedBy)
	}
	adopted := IsAdopted(live)
	if adopted {
		// An adopted cluster's health checks are those its class copied from the old driver's.
		c.Annotations = MergeLabels(c.Annotations, map[string]string{AnnotationAdoptedFrom: live.Annotations[AnnotationAdoptedFrom]})
		t.ControlPlane.HealthCheck = lt.ControlPlane.HealthCheck
	}
	for i := range t.Workers.MachineDeployments {
		md := &t.Workers.MachineDeployments[i]
		for _, old := range lt.Workers.MachineDeployments {
			if old.Name == md.Name {
				md.Class, md.Variables, md.FailureDomain = old.Class, old.Variables, old.FailureDomain
				if adopted && strings.HasPrefix(old.Class, adoptedWorkerClassPrefix) {
					md.HealthCheck = old.HealthCheck
				}
				break
			}
		}
	}
	kept, err := toUnstructured(&c, r.Cluster.GetAPIVersion(), r.Cluster.GetKind())
	if err != nil {
		return err
	}
	r.Cluster, r.Version, r.ClassName, r.ClassObjects = kept, lt.Version, lt.ClassRef.Name, nil
	r.ServerGroups = bridgeServerGroups(&c, r.ServerGroups)
	return nil
}

// KeepVersion gives the rendering live's Kubernetes version: an operator's move of a cluster to the
// running bridge's rendering changes how its machines are made, not what they run.
func (r *Rendered) KeepVersion(live *clusterv1.Cluster) error {
	if err := unstructured.SetNestedField(r.Cluster.Object, live.Spec.Topology.Version, "spec", "topology", "version"); err != nil {
		return err
	}
	r.Version = live.Spec.Topology.Version
	return nil
}
