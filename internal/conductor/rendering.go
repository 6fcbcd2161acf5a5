package conductor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// An operator moves live clusters to the running bridge's rendering deliberately
// (`magnum-capi-bridge rendering plan|apply`, docs/upgrades.md): a plan says which clusters would
// change and which of their machines would roll, a move is an update that applies this bridge's
// rendering with the cluster's own Kubernetes version. Both are the bridge's own RPC methods on the
// conductor topic, answered by any replica; magnum-api never sends them.

// MethodRenderingPlan is the RPC method of the plan.
const MethodRenderingPlan = "bridge_rendering_plan"

// RenderingPlan is one cluster's entry in the plan.
type RenderingPlan struct {
	UUID      string               `json:"uuid"`
	Name      string               `json:"name"`
	ProjectID string               `json:"project_id"`
	Status    magnum.ClusterStatus `json:"status"`
	// RenderedBy is the bridge version whose rendering the cluster has ("" when a bridge before
	// v0.1.0 rendered it).
	RenderedBy string `json:"rendered_by"`
	// Class is the live Cluster's ClusterClass, CurrentClass this bridge's rendering of it.
	Class        string `json:"class"`
	CurrentClass string `json:"current_class"`
	// Changes, ControlPlane and Workers are templates.Move: what differs and what rolls.
	Changes      []string `json:"changes"`
	ControlPlane bool     `json:"control_plane_rolls"`
	Workers      []string `json:"worker_groups_roll"`
	// Machines are the names of the Machines Cluster API would replace.
	Machines []string `json:"machines"`
	// Error says why the cluster could not be planned (it is then not moved).
	Error string `json:"error,omitempty"`
}

// Moves reports whether moving the cluster changes anything.
func (p RenderingPlan) Moves() bool { return p.Error == "" && len(p.Changes) > 0 }

// BridgeRenderingPlan answers bridge_rendering_plan(clusters): the plan of the named clusters (UUIDs),
// or of every cluster not being deleted when none is named.
func (c *Conductor) BridgeRenderingPlan(ctx context.Context, req *rpc.Request) (any, error) {
	var ids []string
	if raw, ok := req.Args["clusters"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, rpc.InvalidArgs("argument \"clusters\": want a list of cluster UUIDs")
		}
	}
	var clusters []*magnum.Cluster
	if len(ids) == 0 {
		var live []magnum.ClusterStatus
		for _, s := range magnum.AllClusterStatuses {
			if !magnum.Deleting(s) && s != magnum.StatusDeleteComplete {
				live = append(live, s)
			}
		}
		all, err := c.store.ListClustersByStatus(ctx, live...)
		if err != nil {
			return nil, rpc.Retry(err)
		}
		clusters = all
	}
	for _, id := range ids {
		cl, err := c.store.GetCluster(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return nil, magnum.ClusterNotFound(id)
		}
		if err != nil {
			return nil, rpc.Retry(err)
		}
		clusters = append(clusters, cl)
	}
	plans := make([]RenderingPlan, 0, len(clusters))
	for _, cl := range clusters {
		p, err := c.planRendering(ctx, cl)
		if err != nil && !permanent(err) {
			return nil, rpc.Retry(err)
		}
		if err != nil {
			p.Error = c.reasonFor(cl.UUID.Or(""), err)
		}
		plans = append(plans, p)
	}
	slices.SortFunc(plans, func(a, b RenderingPlan) int {
		if a.ProjectID != b.ProjectID {
			return cmp.Compare(a.ProjectID, b.ProjectID)
		}
		return cmp.Compare(a.Name+a.UUID, b.Name+b.UUID)
	})
	return plans, nil
}

func (c *Conductor) planRendering(ctx context.Context, cl *magnum.Cluster) (RenderingPlan, error) {
	p := RenderingPlan{UUID: cl.UUID.Or(""), Name: cl.Name.Or(""), ProjectID: cl.ProjectID.Or(""), Status: cl.Status.Or("")}
	switch d, why, err := c.driverOf(ctx, cl); {
	case err != nil:
		return p, err
	case d != templates.DriverBridge:
		return p, &permanentError{fmt.Errorf("built by the %s driver (%s): not this bridge's to move", d, why)}
	}
	switch from, err := c.takenOverFrom(ctx, cl); {
	case err != nil:
		return p, err
	case from != "":
		return p, &permanentError{fmt.Errorf("taken over from %s, whose ClusterClass it keeps: not this bridge's to move", from)}
	}
	in, rendered, err := c.render(ctx, cl, nil)
	if err != nil {
		return p, err // a label this bridge refuses is permanent(): the plan's reason
	}
	p.CurrentClass = rendered.ClassName
	live, found, err := c.kube.GetCluster(ctx, in.Namespace, rendered.Cluster.GetName())
	if err != nil {
		return p, err
	}
	if !found {
		return p, &permanentError{fmt.Errorf("it has no Cluster API cluster %s/%s", in.Namespace, rendered.Cluster.GetName())}
	}
	p.Class, p.RenderedBy = live.Spec.Topology.ClassRef.Name, live.Annotations[templates.AnnotationRenderedBy]
	liveClass, err := c.kube.ReadClusterClass(ctx, in.Namespace, p.Class)
	if err != nil {
		return p, err
	}
	if err := rendered.KeepVersion(live); err != nil {
		return p, &permanentError{err}
	}
	move, err := templates.PlanMove(live, liveClass, rendered.Cluster, rendered.ClassObjects)
	if err != nil {
		return p, &permanentError{err}
	}
	p.Changes, p.ControlPlane, p.Workers = move.Changes, move.ControlPlane, move.Workers
	if !move.Rolls() {
		return p, nil
	}
	machines, err := c.kube.Machines(ctx, in.Namespace, rendered.Cluster.GetName())
	if err != nil {
		return p, err
	}
	for _, m := range machines {
		if (m.ControlPlane && move.ControlPlane) || (!m.ControlPlane && slices.Contains(move.Workers, m.WorkerGroup)) {
			p.Machines = append(p.Machines, m.Name)
		}
	}
	slices.Sort(p.Machines)
	return p, nil
}

// BridgeRenderingMove answers bridge_rendering_move(cluster): the cluster (a UUID) goes UPDATE_IN_PROGRESS
// and the driver applies this bridge's rendering with its Kubernetes version; the status sync ends
// it UPDATE_COMPLETE once Cluster API has rolled what changed.
func (c *Conductor) BridgeRenderingMove(ctx context.Context, req *rpc.Request) (any, error) {
	id, err := stringArg(req, "cluster")
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, rpc.InvalidArgs("argument \"cluster\": the UUID of the cluster to move is required")
	}
	cl, err := c.store.GetCluster(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, magnum.ClusterNotFound(id)
	}
	if err != nil {
		return nil, rpc.Retry(err)
	}
	if err := c.refuseForeign(ctx, cl); err != nil {
		return nil, err
	}
	if err := c.refuseTakenOver(ctx, cl, "Moving a cluster to the current rendering"); err != nil {
		return nil, err
	}
	st := cl.Status.Or("")
	if st == magnum.StatusUpdateInProgress && c.ops.moving(id) && repeated(req) {
		return nil, nil // this replica recorded it before the reply was lost
	}
	if !magnum.OpRenderingMove.Allowed(st) {
		return nil, magnum.NotSupported(fmt.Sprintf("Moving a cluster to the current rendering when status is \"%s\"", st))
	}
	// The class it moves to, in the status reason: the status sync (on whichever replica leads) does
	// not end the move before the Cluster names it.
	_, rendered, err := c.render(ctx, cl, nil)
	if err != nil {
		if permanent(err) {
			return nil, magnum.NotSupported(fmt.Sprintf("Moving the cluster to the current rendering: %s", c.reasonFor(id, err)))
		}
		return nil, rpc.Retry(err)
	}
	reason := capi.MoveReason(rendered.ClassName)
	c.ops.setMove(id)
	return nil, c.startUpdate(ctx, cl, ClusterUpdate{StatusReason: &reason})
}
