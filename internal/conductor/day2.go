package conductor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Day-2 operations, as Magnum's cluster and nodegroup conductors accept them (the guards are
// magnum.Transitions): each writes Magnum's synchronous state at once (the *_IN_PROGRESS statuses
// Terraform polls for), re-renders the cluster and applies it; the watch moves the statuses on.

// loadForUpdate reads the stored cluster named by the "cluster" argument and checks the caller may
// act on it and that its status allows the operation (Magnum's NotSupported otherwise). A cluster
// already UPDATE_IN_PROGRESS is accepted when resumes says this request is the one that put it
// there (a retry or redelivery after a partial attempt): the operation is resumed, not refused.
func (c *Conductor) loadForUpdate(ctx context.Context, req *rpc.Request, operation string, op magnum.Operation,
	resumes func(*magnum.Cluster) bool) (*magnum.Cluster, error) {
	cl, err := c.clusterForCall(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := c.refuseTakenOver(ctx, cl, operation); err != nil {
		return nil, err
	}
	st := cl.Status.Or("")
	if op.Allowed(st) || (st == magnum.StatusUpdateInProgress && resumes != nil && resumes(cl)) {
		return cl, nil
	}
	return nil, magnum.NotSupported(fmt.Sprintf("%s when status is \"%s\"", operation, st))
}

// repeated is true for a request that ran before: a retry in this process or a redelivery.
func repeated(req *rpc.Request) bool { return req.Attempt > 1 || req.Redelivered }

// startUpdate records the operation — the cluster UPDATE_IN_PROGRESS, guarded on the status it was
// read in, with extra columns in the same write — and hands the cluster to the operation driver.
func (c *Conductor) startUpdate(ctx context.Context, cl *magnum.Cluster, extra ClusterUpdate) error {
	st := magnum.StatusUpdateInProgress
	extra.Status = &st
	if extra.StatusReason == nil {
		empty := ""
		extra.StatusReason = &empty
	}
	extra.OnlyIfStatus = []magnum.ClusterStatus{cl.Status.Or(""), magnum.StatusUpdateInProgress}
	id := cl.UUID.Or("")
	err := c.store.UpdateCluster(ctx, id, extra)
	if errors.Is(err, ErrConflict) {
		return magnum.Conflict("the cluster changed while the request was handled; try again")
	}
	if err != nil {
		return rpc.Retry(err)
	}
	c.ops.begin(id, c.opts.Now())
	c.enqueue(id)
	return nil
}

func (c *Conductor) defaultWorker(ctx context.Context, id string) (*magnum.NodeGroup, error) {
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.IsDefault.Or(false) && g.Role.Or("") != "master" {
			return g, nil
		}
	}
	return nil, magnum.NodeGroupNotFound("default-worker")
}

// ClusterUpdate implements cluster_update(cluster, node_count, health_status, health_status_reason,
// rollback): the `PATCH node_count` path of the CLI and Terraform, and health reports from outside.
// The default worker group's new size and UPDATE_IN_PROGRESS are written in one statement (so the
// status sync never takes the old size back), then the cluster's status.
func (c *Conductor) ClusterUpdate(ctx context.Context, req *rpc.Request) (any, error) {
	count, err := intArg(req, "node_count", -1)
	if err != nil {
		return nil, err
	}
	cl, err := c.loadForUpdate(ctx, req, "Updating a cluster", magnum.OpClusterUpdate, func(cl *magnum.Cluster) bool {
		// The stored worker already has this size, or this very request ran before.
		w, err := c.defaultWorker(ctx, cl.UUID.Or(""))
		return repeated(req) || (err == nil && count >= 0 && int64(count) == w.NodeCount.Or(0))
	})
	if err != nil {
		return nil, err
	}
	id := cl.UUID.Or("")
	worker, err := c.defaultWorker(ctx, id)
	if err != nil {
		return nil, err
	}
	health, err := stringArg(req, "health_status")
	if err != nil {
		return nil, err
	}
	if health != "" && health != string(cl.HealthStatus.Or("")) {
		hs := magnum.HealthStatus(health)
		if !hs.Valid() {
			return nil, invalidParameter(fmt.Sprintf("invalid health_status %q", health))
		}
		if err := c.store.UpdateCluster(ctx, id, ClusterUpdate{HealthStatus: &hs}); err != nil {
			return nil, rpc.Retry(err)
		}
	}
	if count < 0 {
		return nil, nil
	}
	partial := worker.Status.Or("") == magnum.StatusUpdateInProgress || cl.Status.Or("") == magnum.StatusUpdateInProgress
	if int64(count) == worker.NodeCount.Or(0) && !partial {
		return nil, nil
	}
	n := int64(count)
	st := magnum.Transitions[magnum.OpClusterUpdate].NodeGroup
	empty := ""
	if err := c.store.UpdateNodeGroup(ctx, worker.UUID.Or(""), NodeGroupUpdate{ClusterUUID: id, NodeCount: &n, Status: &st, StatusReason: &empty}); err != nil {
		return nil, rpc.Retry(err)
	}
	return nil, c.startUpdate(ctx, cl, ClusterUpdate{})
}

// ClusterResize implements cluster_resize(cluster, node_count, nodes_to_remove, nodegroup): the named
// machines are the ones that go, through CAPI's delete-machine annotation.
func (c *Conductor) ClusterResize(ctx context.Context, req *rpc.Request) (any, error) {
	cl, err := c.loadForUpdate(ctx, req, "Resizing a cluster", magnum.OpClusterResize, nil)
	if err != nil {
		return nil, err
	}
	id := cl.UUID.Or("")
	count, err := intArg(req, "node_count", -1)
	if err != nil {
		return nil, err
	}
	_, ng, err := c.nodeGroupArg(ctx, req, id)
	if err != nil {
		return nil, err
	}
	var remove []string
	if raw, ok := req.Args["nodes_to_remove"]; ok && string(raw) != "null" {
		if err := jsonUnmarshal(raw, &remove); err != nil {
			return nil, rpc.InvalidArgs("nodes_to_remove: want a list of node names")
		}
	}
	isMaster := ng.Role.Or("") == "master"
	// The group already has this size and is being resized: a retry or redelivery of this request
	// after its rows were written. Its named nodes may be gone already.
	resuming := ng.Status.Or("") == magnum.StatusUpdateInProgress && count >= 0 && int64(count) == ng.NodeCount.Or(0)
	switch {
	case count < 0:
		return nil, rpc.InvalidArgs("node_count is required")
	case isMaster && (count < 1 || count%2 == 0):
		return nil, invalidParameter(fmt.Sprintf("a control plane needs an odd number of nodes, not %d", count))
	case isMaster && len(remove) > 0:
		return nil, magnum.NotSupported("Removing named control-plane nodes")
	case len(remove) > 0 && !resuming && int64(count) != ng.NodeCount.Or(0)-int64(len(remove)):
		return nil, invalidParameter(fmt.Sprintf("node_count %d does not match removing %d of %d nodes", count, len(remove), ng.NodeCount.Or(0)))
	}
	if len(remove) > 0 {
		unknown, err := c.kube.MarkMachinesForDeletion(ctx, c.namespace(cl.ProjectID.Or("")), cl.StackID.Or(""), ng.UUID.Or(""), remove)
		if err != nil {
			return nil, rpc.Retry(err)
		}
		if len(unknown) > 0 && !resuming {
			return nil, invalidParameter("no such node in node group " + ng.Name.Or("") + ": " + strings.Join(unknown, ", "))
		}
	}
	n := int64(count)
	st := magnum.Transitions[magnum.OpClusterResize].NodeGroup
	empty := ""
	if err := c.store.UpdateNodeGroup(ctx, ng.UUID.Or(""), NodeGroupUpdate{ClusterUUID: id, NodeCount: &n, Status: &st, StatusReason: &empty}); err != nil {
		return nil, rpc.Retry(err)
	}
	return nil, c.startUpdate(ctx, cl, ClusterUpdate{})
}

// nodeGroupArg decodes the "nodegroup" argument and reads the stored row it names: Magnum's
// NodeGroupNotFound when there is none, a retry when the database cannot answer.
func (c *Conductor) nodeGroupArg(ctx context.Context, req *rpc.Request, clusterUUID string) (arg, stored *magnum.NodeGroup, err error) {
	arg = &magnum.NodeGroup{}
	if err := c.decodeView(req, "nodegroup", arg); err != nil {
		return nil, nil, err
	}
	stored, err = c.store.GetNodeGroup(ctx, clusterUUID, arg.UUID.Or(""))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil, magnum.NodeGroupNotFound(arg.UUID.Or(""))
	case err != nil:
		return nil, nil, rpc.Retry(err)
	}
	return arg, stored, nil
}

// NodeGroupCreate implements nodegroup_create(cluster, nodegroup): the row is inserted at once
// (Terraform aborts on a 404), then the MachineDeployment is added to the topology.
func (c *Conductor) NodeGroupCreate(ctx context.Context, req *rpc.Request) (any, error) {
	cl, err := c.loadForUpdate(ctx, req, "Adding a node group", magnum.OpNodeGroupCreate, nil)
	if err != nil {
		return nil, err
	}
	ng := &magnum.NodeGroup{}
	if err := c.decodeView(req, "nodegroup", ng); err != nil {
		return nil, err
	}
	// The group belongs to the cluster the caller may act on, whatever the message says.
	ng.ClusterID.Set(cl.UUID.Or(""))
	ng.ProjectID.Set(cl.ProjectID.Or(""))
	if ng.Role.Or("worker") == "master" {
		return nil, magnum.NotSupported("Adding a control-plane node group")
	}
	ng.Status.Set(magnum.Transitions[magnum.OpNodeGroupCreate].NodeGroup)
	ng.StackID.Set(cl.StackID.Or(""))
	if !ng.NodeAddresses.IsSet() {
		ng.NodeAddresses.Set([]string{})
	}
	if !ng.ImageID.IsSet() {
		if tmpl, err := c.store.GetClusterTemplate(ctx, cl.ClusterTemplateID.Or("")); err == nil {
			ng.ImageID.Set(tmpl.ImageID.Or(""))
		}
	}
	created, err := c.store.CreateNodeGroup(ctx, ng)
	if err != nil {
		var me *magnum.Exception
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, rpc.Retry(err)
	}
	if !created {
		// A redelivery, or a uuid that is another cluster's group: only the former is resumed.
		if _, err := c.store.GetNodeGroup(ctx, cl.UUID.Or(""), ng.UUID.Or("")); err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, authorizationFailure(fmt.Sprintf("node group %s belongs to another cluster", ng.UUID.Or("")))
			}
			return nil, rpc.Retry(err)
		}
	}
	return nil, c.startUpdate(ctx, cl, ClusterUpdate{})
}

// NodeGroupUpdate implements nodegroup_update(cluster, nodegroup): the API's changes are saved as
// Python's save() would, then applied.
func (c *Conductor) NodeGroupUpdate(ctx context.Context, req *rpc.Request) (any, error) {
	cl, err := c.clusterForCall(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := c.refuseTakenOver(ctx, cl, "Updating a node group"); err != nil {
		return nil, err
	}
	ng, stored, err := c.nodeGroupArg(ctx, req, cl.UUID.Or(""))
	if err != nil {
		return nil, err
	}
	if st := stored.Status.Or(""); !magnum.OpNodeGroupUpdate.Allowed(st) {
		return nil, magnum.NotSupported(fmt.Sprintf("Updating a node group when status is \"%s\"", st))
	}
	ng.Status.Set(magnum.Transitions[magnum.OpNodeGroupUpdate].NodeGroup)
	if err := c.store.SaveNodeGroupChanges(ctx, ng, stored.Status.Or("")); err != nil {
		return nil, rpc.Retry(err)
	}
	return nil, c.startUpdate(ctx, cl, ClusterUpdate{})
}

// NodeGroupDelete implements nodegroup_delete(cluster, nodegroup): DELETE_IN_PROGRESS at once; the
// row goes when the watch sees the group's machines gone.
func (c *Conductor) NodeGroupDelete(ctx context.Context, req *rpc.Request) (any, error) {
	cl, err := c.clusterForCall(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := c.refuseTakenOver(ctx, cl, "Deleting a node group"); err != nil {
		return nil, err
	}
	id := cl.UUID.Or("")
	_, ng, err := c.nodeGroupArg(ctx, req, id)
	if errors.Is(err, magnum.ErrNodeGroupNotFound) {
		return nil, nil // already gone: a redelivery
	}
	if err != nil {
		return nil, err
	}
	if ng.IsDefault.Or(false) {
		return nil, magnum.NotSupported("Deleting a default node group")
	}
	st := magnum.Transitions[magnum.OpNodeGroupDelete].NodeGroup
	empty := ""
	if err := c.store.UpdateNodeGroup(ctx, ng.UUID.Or(""), NodeGroupUpdate{ClusterUUID: id, Status: &st, StatusReason: &empty}); err != nil {
		return nil, rpc.Retry(err)
	}
	return nil, c.startUpdate(ctx, cl, ClusterUpdate{})
}

// RotateCACertificate implements rotate_ca_certificate: refused before anything is persisted. Magnum
// itself stores new CA refs first and leaves the cluster UPDATE_FAILED with a CA it does not trust.
func (c *Conductor) RotateCACertificate(ctx context.Context, req *rpc.Request) (any, error) {
	if _, err := c.clusterForCall(ctx, req); err != nil {
		return nil, err
	}
	return nil, magnum.NotSupportedMessage("Rotating the CA of a Cluster API cluster is not supported yet; the cluster and its certificates are unchanged.")
}

// upgradeCheck validates a Kubernetes version change: no downgrade, no skipped minor.
func upgradeCheck(from, to string) error {
	fv, err := templates.ParseVersion(from)
	if err != nil {
		return nil // an unknown current version cannot be compared; CAPI validates the rest
	}
	tv, err := templates.ParseVersion(to)
	if err != nil {
		return err
	}
	switch {
	// The key words come before the first '.': magnum-api's error title (what the CLI prints) is
	// the message up to its first full stop, and every version number has one.
	case tv.Major() != fv.Major():
		return fmt.Errorf("an upgrade may not change the major Kubernetes version (from %s to %s)", from, to)
	case tv.LessThan(fv):
		return fmt.Errorf("downgrades are not supported (the cluster runs %s, the template asks for %s)", from, to)
	case tv.Minor() > fv.Minor()+1:
		return fmt.Errorf("an upgrade may not skip a Kubernetes minor version (from %s to %s: upgrade to v%d.%d first)", from, to, fv.Major(), fv.Minor()+1)
	}
	return nil
}

// ClusterUpgrade implements cluster_upgrade(cluster, cluster_template, max_batch_size, nodegroup): a
// call magnum-api waits on. Everything is validated before anything changes — the arguments, the
// target template, the version step, the version against the target's image and the supported
// range (templates.CheckKubernetesVersion), and a server-side dry run of the new topology — so a refusal
// leaves the cluster as it was (*_COMPLETE). Then the template is switched, the upgraded node groups
// and the cluster set UPDATE_IN_PROGRESS, the topology applied, and the reply sent; CAPI rolls the
// control plane, then the workers, max_batch_size new machines at a time per node group.
//
// magnum-api names its default worker group when the tenant names none; a default group (or the
// control plane) upgrades the whole cluster, since CAPI's topology runs one Kubernetes version.
// Another group may only be brought to the cluster's current template (magnum-api checks it, and so
// does this): the upgrade is limited to that group (templates.Input.UpgradeCovers).
func (c *Conductor) ClusterUpgrade(ctx context.Context, req *rpc.Request) (any, error) {
	arg := &magnum.ClusterTemplate{}
	if err := c.decodeView(req, "cluster_template", arg); err != nil {
		return nil, err
	}
	cl, err := c.loadForUpdate(ctx, req, "Upgrading a cluster", magnum.OpClusterUpgrade, func(cl *magnum.Cluster) bool {
		// This request ran before and already switched the template: resume its apply.
		return repeated(req) && cl.ClusterTemplateID.Or("") == arg.UUID.Or("")
	})
	if err != nil {
		return nil, err
	}
	if cl.Status.Or("") == magnum.StatusUpdateInProgress {
		id := cl.UUID.Or("")
		c.ops.begin(id, c.opts.Now())
		c.enqueue(id)
		return nil, nil
	}
	id := cl.UUID.Or("")
	upgrade := &templates.Upgrade{}
	if upgrade.MaxBatchSize, err = intArg(req, "max_batch_size", 1); err != nil {
		return nil, err
	}
	if upgrade.MaxBatchSize < 1 {
		return nil, invalidParameter(fmt.Sprintf("max_batch_size must be at least 1, not %d", upgrade.MaxBatchSize))
	}
	var named *magnum.NodeGroup
	if raw, ok := req.Args["nodegroup"]; ok && string(raw) != "null" {
		if _, named, err = c.nodeGroupArg(ctx, req, id); err != nil {
			return nil, err
		}
		upgrade.NodeGroup = named.UUID.Or("")
	}
	target, err := c.store.GetClusterTemplate(ctx, arg.UUID.Or(""))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, magnum.ClusterTemplateNotFound(arg.UUID.Or(""))
		}
		return nil, rpc.Retry(err)
	}
	current, err := c.store.GetClusterTemplate(ctx, cl.ClusterTemplateID.Or(""))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, rpc.Retry(err)
	}
	if target.COE.Or("") != "" && current != nil && target.COE.Or("") != current.COE.Or("") {
		return nil, magnum.InvalidClusterTemplateForUpgrade("the target template is not for " + string(current.COE.Or("")))
	}
	if named != nil && !named.IsDefault.Or(false) && named.Role.Or("") != "master" && target.UUID.Or("") != cl.ClusterTemplateID.Or("") {
		return nil, magnum.InvalidClusterTemplateForUpgrade(fmt.Sprintf("node group %s can be upgraded only to match the cluster's template (%s)",
			named.Name.Or(""), cl.ClusterTemplateID.Or("")))
	}
	labels := upgradedLabels(dictMap(cl.Labels), templateLabels(current), dictMap(target.Labels))
	newVersion, err := templates.KubernetesVersion(labels, target.ImageID.Or(""), c.opts.DefaultKubernetesVersion)
	if err != nil {
		return nil, magnum.InvalidClusterTemplateForUpgrade(err.Error())
	}
	if err := upgradeCheck(cl.CoeVersion.Or(""), newVersion); err != nil {
		return nil, magnum.InvalidClusterTemplateForUpgrade(err.Error())
	}
	// The new template obeys the create's rule: its image must run the version, in the supported range.
	img := c.lookupImage(ctx, req.Context, cl.ProjectID.Or(""), target.ImageID.Or(""))
	if _, err := templates.CheckKubernetesVersion(labels, img, c.opts.DefaultKubernetesVersion, c.versionPolicy()); err != nil {
		return nil, magnum.InvalidClusterTemplateForUpgrade(err.Error())
	}

	// Dry run of exactly what will be applied.
	planned := *cl
	planned.ClusterTemplateID.Set(target.UUID.Or(""))
	planned.Labels.Set(magnum.DictFromMap(labels))
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return nil, rpc.Retry(err)
	}
	in := c.renderInput(&planned, target, groups, upgrade)
	images := upgradedImages(in, current, target)
	if in.Cluster.AdoptedName, err = c.adoptedName(ctx, cl); err != nil {
		return nil, rpc.Retry(err)
	}
	rendered, err := templates.Render(in)
	if err != nil {
		return nil, magnum.InvalidClusterTemplateForUpgrade(c.reasonFor(id, err))
	}
	if _, err := c.keepRendering(ctx, in, rendered, false, true); err != nil {
		if permanent(err) {
			return nil, magnum.InvalidClusterTemplateForUpgrade(c.reasonFor(id, err))
		}
		return nil, rpc.Retry(err)
	}
	if err := c.kube.DryRunApply(ctx, append(rendered.ClassObjects, rendered.Cluster)...); err != nil {
		if permanent(err) {
			return nil, magnum.InvalidClusterTemplateForUpgrade("the management cluster refuses the new topology: " + c.reasonFor(id, err))
		}
		// The management cluster cannot answer now. The upgrade is recorded anyway and the driver
		// applies it when it is back (a refusal then ends UPDATE_FAILED with the reason) rather
		// than magnum-api timing out on a call the tenant would have to repeat.
		c.log.WarnContext(ctx, "cluster_upgrade: dry run not possible, applying without it", "cluster", id, "error", err)
	}

	st := magnum.Transitions[magnum.OpClusterUpgrade].NodeGroup
	empty := ""
	for _, g := range in.NodeGroups { // groups being deleted are not in the input
		if !in.UpgradeCovers(g) {
			continue
		}
		u := NodeGroupUpdate{ClusterUUID: id, Status: &st, StatusReason: &empty}
		if image, ok := images[g.UUID]; ok {
			u.ImageID = &image
		}
		if err := c.store.UpdateNodeGroup(ctx, g.UUID, u); err != nil {
			return nil, rpc.Retry(err)
		}
	}
	tid := target.UUID.Or("")
	c.ops.setUpgrade(id, upgrade) // the rollout settings reach the driver's apply
	return nil, c.startUpdate(ctx, cl, ClusterUpdate{TemplateID: &tid, Labels: labels})
}

// upgradedImages moves the node groups an upgrade covers from the old template's image to the new
// one's (in the input, and returned by group uuid for the rows): a group made with the template's
// image follows the template, one given its own image at create keeps it.
func upgradedImages(in templates.Input, current, target *magnum.ClusterTemplate) map[string]string {
	oldImage, newImage := "", target.ImageID.Or("")
	if current != nil {
		oldImage = current.ImageID.Or("")
	}
	moved := map[string]string{}
	for i := range in.NodeGroups {
		g := &in.NodeGroups[i]
		if newImage != "" && g.ImageID != newImage && (g.ImageID == "" || g.ImageID == oldImage) && in.UpgradeCovers(*g) {
			g.ImageID = newImage
			moved[g.UUID] = newImage
		}
	}
	return moved
}

func templateLabels(t *magnum.ClusterTemplate) map[string]string {
	if t == nil {
		return map[string]string{}
	}
	return dictMap(t.Labels)
}

// upgradedLabels moves a cluster's labels to a new template: every label the new template sets wins,
// labels inherited unchanged from the old template and dropped by the new one go, and labels the
// tenant set on the cluster alone stay.
func upgradedLabels(cluster, oldTmpl, newTmpl map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range cluster {
		if old, inherited := oldTmpl[k]; inherited && old == v {
			continue
		}
		out[k] = v
	}
	for k, v := range newTmpl {
		out[k] = v
	}
	return out
}
