package capi

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// warmKinds are kinds of every API group (and version) a create writes: resolving one of each
// loads the group's discovery into the client's REST mapper.
var warmKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Secret"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"},
	{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSet"},
	schema.FromAPIVersionAndKind(templates.BootstrapGroupVersion, "KubeadmConfigTemplate"),
	schema.FromAPIVersionAndKind(templates.ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate"),
	schema.FromAPIVersionAndKind(templates.InfraGroupVersion, "DevClusterTemplate"),
	schema.FromAPIVersionAndKind(templates.CAPOGroupVersion, "OpenStackClusterTemplate"),
}

// Warm does at start-up what the first create would otherwise do on its way to the Cluster: the
// discovery of each API group it writes (the REST mapper loads a group on first use, one request
// per group version) and the bridge's own identity for the project namespaces' RoleBindings (a
// SelfSubjectReview). It was a quarter of a second of the first create after a start. A failure
// (a provider not installed: its kind is not served) only leaves that lookup to the create.
func (c *Client) Warm(ctx context.Context) error {
	var errs []error
	for _, gvk := range warmKinds {
		if _, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := c.self.subject(ctx, c.Client); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
