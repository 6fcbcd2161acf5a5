package conductor

import (
	"cmp"
	"context"
	"slices"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// An operator who replaces another conductor asks first what the bridge would do with each
// cluster of the database (`magnum-capi-bridge adoption plan`): a dry run that reads the rows and
// the management cluster and changes nothing. Like the rendering plan it is the bridge's own RPC
// method, answered by any replica; magnum-api never sends it.

// MethodAdoptionPlan is the RPC method of the adoption plan.
const MethodAdoptionPlan = "bridge_adoption_plan"

// BridgeAdoptionPlan answers bridge_adoption_plan(): an adoption.Entry for every cluster of the
// database that is not deleted, by project and name.
func (c *Conductor) BridgeAdoptionPlan(ctx context.Context, req *rpc.Request) (any, error) {
	if req.Context == nil || !req.Context.IsAdmin {
		return nil, authorizationFailure("the adoption plan is an operator's: it needs an admin context")
	}
	var statuses []magnum.ClusterStatus
	for _, s := range magnum.AllClusterStatuses {
		if s != magnum.StatusDeleteComplete {
			statuses = append(statuses, s)
		}
	}
	clusters, err := c.store.ListClustersByStatus(ctx, statuses...)
	if err != nil {
		return nil, rpc.Retry(err)
	}
	naming := adoption.Naming{BridgeNamespacePrefix: c.opts.NamespacePrefix, CAPIHelmNamespacePrefix: c.opts.CAPIHelmNamespacePrefix}
	entries := make([]adoption.Entry, 0, len(clusters))
	for _, cl := range clusters {
		row := adoption.Cluster{UUID: cl.UUID.Or(""), Name: cl.Name.Or(""), ProjectID: cl.ProjectID.Or(""),
			StackID: cl.StackID.Or(""), Status: cl.Status.Or("")}
		d, why := c.driverOf(ctx, cl)
		var found *adoption.Found
		if ns, name, ok := naming.Where(d, row); ok && name != "" {
			found, err = c.lookForCluster(ctx, ns, name)
			if err != nil {
				return nil, rpc.Retry(err)
			}
		}
		entries = append(entries, adoption.Decide(row, d, why, found))
	}
	slices.SortFunc(entries, func(a, b adoption.Entry) int {
		return cmp.Or(cmp.Compare(a.ProjectID, b.ProjectID), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UUID, b.UUID))
	})
	return entries, nil
}

// lookForCluster is what the management cluster holds of the Cluster API cluster namespace/name.
func (c *Conductor) lookForCluster(ctx context.Context, namespace, name string) (*adoption.Found, error) {
	f := &adoption.Found{Namespace: namespace, Name: name}
	obs, found, err := c.kube.Observe(ctx, namespace, name)
	if err != nil || !found {
		return f, err
	}
	f.Cluster = true
	f.Deleting = !obs.Cluster.DeletionTimestamp.IsZero()
	if t := obs.Cluster.Spec.Topology; t.IsDefined() {
		f.Topology, f.Class = true, t.ClassRef.Name
	}
	for _, md := range obs.MachineDeployments {
		f.MachineDeployments = append(f.MachineDeployments, md.Name)
	}
	f.Machines = len(obs.Machines)
	return f, nil
}
