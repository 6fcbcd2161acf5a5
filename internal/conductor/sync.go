package conductor

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// The status sync replaces Magnum's periodic sync_cluster_status and sync_cluster_health_status:
// the CAPI watch calls ClusterObserved the moment anything of a cluster changes, and the conductor
// writes what changed into Magnum's rows. Writes are guarded by the status they were computed
// from, so a racing API call or another replica never has its update lost.

var _ capi.Sink = (*Conductor)(nil)

// ClusterObserved implements capi.Sink.
func (c *Conductor) ClusterObserved(ctx context.Context, id string, obs capi.Observation) (time.Duration, error) {
	cl, err := c.store.GetCluster(ctx, id)
	if errors.Is(err, ErrNotFound) {
		c.log.WarnContext(ctx, "CAPI cluster has no Magnum cluster", "cluster", id, "capi", obs.Cluster.Namespace+"/"+obs.Cluster.Name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	status := cl.Status.Or("")
	if status == "" {
		return 0, nil
	}
	// A cluster taken over from magnum-cluster-api keeps that driver's autoscaler and labels.
	takenOver, err := c.takenOverFrom(ctx, cl)
	if err != nil {
		return 0, err
	}
	// The autoscaler goes with the cluster's state, whatever operation is running (a delete removes it).
	var autoscalerNote string
	var autoscalerRetry bool
	if takenOver == "" {
		autoscalerNote, autoscalerRetry = c.followAutoscaler(ctx, cl, obs)
	}
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return 0, err
	}
	if takenOver != "" {
		// Its MachineDeployments are named after the node groups, and carry no uuid.
		byName := map[string]string{}
		for _, g := range groups {
			byName[g.Name.Or("")] = g.UUID.Or("")
		}
		obs = capi.WithNodeGroupsByName(obs, byName)
	}
	now := c.opts.Now()
	cur := capi.Current{Status: status, StatusReason: cl.StatusReason.Or(""), CreatedAt: cl.CreatedAt.Or(time.Time{}),
		CreateTimeout: time.Duration(cl.CreateTimeout.Or(0)) * time.Minute}
	if status == magnum.StatusUpdateInProgress || status == magnum.StatusDeleteInProgress {
		cur.Deadline = c.deadline(cl, status)
		cur.DeadlineName = timeoutName(status, c.timeout(cl, status))
	}
	if status == magnum.StatusDeleteInProgress {
		// Only the deadline matters while CAPI deletes; the driver finishes the delete when it is gone.
		if d := capi.Decide(cur, capi.Observation{Cluster: obs.Cluster}, now); d.Status == magnum.StatusDeleteFailed {
			return 0, c.failOperation(ctx, cl, magnum.StatusDeleteInProgress, "", &permanentError{errors.New(d.StatusReason)})
		}
		return cur.Deadline.Sub(now) + time.Second, nil
	}
	// What Magnum asked for: an operation is not complete while CAPI shows another version. An
	// adopted cluster's template may leave the version to its image's kube_version property, as
	// its old driver read it: unless kube_tag names one, the version it runs is what was asked.
	adoptedVersion := obs.Cluster != nil && templates.IsAdopted(obs.Cluster) && dictMap(cl.Labels)[templates.LabelKubeTag] == ""
	if tmpl, err := c.store.GetClusterTemplate(ctx, cl.ClusterTemplateID.Or("")); err == nil && !adoptedVersion {
		cur.Version, _ = templates.KubernetesVersion(dictMap(cl.Labels), tmpl.ImageID.Or(""), c.opts.DefaultKubernetesVersion)
	}
	autoscaling := templates.LabelEnabled(dictMap(cl.Labels), templates.LabelAutoScalingEnabled)
	for _, g := range groups {
		cur.NodeGroups = append(cur.NodeGroups, capi.NodeGroupState{
			UUID: g.UUID.Or(""), Name: g.Name.Or(""), Role: g.Role.Or(""), Status: g.Status.Or(""),
			StatusReason: g.StatusReason.Or(""), NodeCount: int(g.NodeCount.Or(0)), NodeAddresses: g.NodeAddresses.Or(nil),
			Autoscaled: autoscaling && g.MaxNodeCount.IsSet() && !g.MaxNodeCount.IsNull() && g.Role.Or("") != "master",
		})
	}
	if (status == magnum.StatusCreateInProgress || status == magnum.StatusUpdateInProgress) && obs.Cluster != nil && c.onOpenStack(cl) {
		// Nova's or Neutron's refusal (a quota, a missing image) is only on CAPO's own objects.
		failures, err := c.kube.CloudFailures(ctx, obs.Cluster.Namespace, obs.Cluster.Name)
		if err != nil {
			c.log.WarnContext(ctx, "reading CAPO's conditions failed; the status reason goes without them", "cluster", id, "error", err)
		}
		obs.CloudFailures = failures
	}
	d := capi.Decide(cur, obs, now)
	if d.Terminal && status == magnum.StatusUpdateInProgress && d.Status == magnum.StatusUpdateComplete && obs.Cluster != nil {
		// The watch's caches are separate streams: a Cluster that took in an update (a moved class,
		// say) can arrive before its MachineDeployments have started rolling. An update ends only
		// when the apiserver itself says it has.
		live, found, err := c.kube.Observe(ctx, obs.Cluster.Namespace, obs.Cluster.Name)
		if err != nil {
			return 0, err
		}
		if found {
			live.CloudFailures, live.AddonBinding, live.AddonSet = obs.CloudFailures, obs.AddonBinding, obs.AddonSet
			if again := capi.Decide(cur, live, now); again.Status != d.Status {
				return time.Second, nil // the caches catch up; this or the next event decides
			}
		}
	}
	d.StatusReason = redactEndpoints(d.StatusReason)
	if unimpl, err := templates.ValidateLabels(templates.SelectedFlavor(dictMap(cl.Labels), c.opts.Flavor), dictMap(cl.Labels)); err == nil && len(unimpl) > 0 && takenOver == "" {
		d.StatusReason = withNote(d.StatusReason, "labels not implemented by magnum-capi-bridge (ignored): "+strings.Join(unimpl, ", "))
	}
	d.StatusReason = withNote(withoutAutoscalerNote(d.StatusReason), autoscalerNote)

	u := ClusterUpdate{OnlyIfStatus: []magnum.ClusterStatus{status}}
	changed := false
	if d.Status != status {
		u.Status, changed = ptr(d.Status), true
	}
	if d.StatusReason != cl.StatusReason.Or("") {
		u.StatusReason, changed = ptr(d.StatusReason), true
	}
	if d.APIAddress != "" && d.APIAddress != cl.APIAddress.Or("") {
		u.APIAddress, changed = ptr(d.APIAddress), true
	}
	if d.COEVersion != "" && d.COEVersion != cl.CoeVersion.Or("") {
		u.COEVersion, changed = ptr(d.COEVersion), true
	}
	if d.Health != "" && d.Health != cl.HealthStatus.Or("") {
		u.HealthStatus, changed = ptr(d.Health), true
	}
	if d.HealthReason != nil && !maps.Equal(d.HealthReason, dictMap(cl.HealthStatusReason)) {
		u.HealthStatusReason, changed = d.HealthReason, true
	}
	// Node groups first: when the cluster turns *_COMPLETE its groups are already final.
	for i, g := range d.NodeGroups {
		old := cur.NodeGroups[i]
		if g.Gone {
			for _, row := range groups {
				if row.UUID.Or("") == g.UUID {
					if err := c.deleteServerGroups(ctx, cl, []*magnum.NodeGroup{row}); err != nil {
						if !permanent(err) {
							return 0, err // Nova unreachable: the watch retries
						}
						c.log.WarnContext(ctx, "node group delete: server group left in Nova", "cluster", id, "nodegroup", g.Name, "error", err)
					}
				}
			}
			if err := c.store.DeleteNodeGroup(ctx, id, g.UUID); err != nil && !errors.Is(err, ErrNotFound) {
				return 0, err
			}
			c.log.InfoContext(ctx, "node group deleted", "cluster", id, "nodegroup", g.Name)
			continue
		}
		nu := NodeGroupUpdate{OnlyIfStatus: []magnum.ClusterStatus{old.Status}}
		ngChanged := false
		if g.Status != old.Status {
			nu.Status, ngChanged = ptr(g.Status), true
		}
		if g.StatusReason != old.StatusReason {
			nu.StatusReason, ngChanged = ptr(g.StatusReason), true
		}
		if g.NodeCount != old.NodeCount {
			nu.NodeCount, ngChanged = ptr(int64(g.NodeCount)), true
		}
		if !slices.Equal(g.NodeAddresses, old.NodeAddresses) && !(len(g.NodeAddresses) == 0 && len(old.NodeAddresses) == 0) {
			nu.NodeAddresses, ngChanged = g.NodeAddresses, true
		}
		if ngChanged {
			nu.ClusterUUID = id
			if err := c.store.UpdateNodeGroup(ctx, g.UUID, nu); err != nil && !errors.Is(err, ErrConflict) {
				return 0, err
			}
		}
	}
	if changed {
		if err := c.store.UpdateCluster(ctx, id, u); err != nil {
			if errors.Is(err, ErrConflict) {
				return time.Millisecond, nil // someone else wrote first: look again with fresh rows
			}
			return 0, err
		}
		if d.Terminal {
			c.ops.end(id)
			c.log.InfoContext(ctx, "cluster status", "cluster", id, "status", d.Status, "reason", d.StatusReason)
		}
	}
	// An operation still running is looked at again when its deadline passes, even if CAPI is silent.
	switch {
	case autoscalerRetry:
		return autoscalerRetryAfter, nil
	case d.Status == magnum.StatusCreateInProgress && cur.CreateTimeout > 0:
		if left := cur.CreatedAt.Add(cur.CreateTimeout).Sub(now); left > 0 {
			return left + time.Second, nil
		}
	case d.Status == magnum.StatusUpdateInProgress && !cur.Deadline.IsZero():
		if left := cur.Deadline.Sub(now); left > 0 {
			return left + time.Second, nil
		}
	}
	return 0, nil
}

// ClusterGone implements capi.Sink: a deleted CAPI Cluster lets its Magnum cluster's delete finish.
// A delete that already ended DELETE_FAILED (its deadline passed while CAPI was still deleting)
// finishes too: the cluster is gone after all.
func (c *Conductor) ClusterGone(ctx context.Context, namespace, name string) error {
	if !strings.HasPrefix(namespace, c.opts.NamespacePrefix) && namespace != templates.ClusterAPINamespace {
		return nil // another bridge's namespace
	}
	clusters, err := c.store.ListClustersByStatus(ctx, magnum.StatusDeleteInProgress, magnum.StatusDeleteFailed)
	if err != nil {
		return err
	}
	for _, cl := range clusters {
		if cl.StackID.Or("") != name {
			continue
		}
		// A project's cluster, or one taken over in magnum-cluster-api's namespace shared by all.
		if ns, err := c.placeOf(ctx, cl); err != nil {
			return err
		} else if ns != namespace {
			continue
		}
		if cl.Status.Or("") == magnum.StatusDeleteInProgress {
			c.resume(cl.UUID.Or("")) // the replica holding its claim, if alive, finishes it itself
			return nil
		}
		return unwrapRetry(c.finishDelete(ctx, cl, nil))
	}
	return nil
}

// Resync resumes every operation a previous run left in progress — creates, updates, resizes,
// upgrades, node group changes and deletes — by handing the clusters to the operation driver,
// which re-applies what their rows record unless another live replica holds the cluster's claim.
// The leader calls it when it starts leading and then every ResumeEvery interval; it also sweeps
// the claims dead replicas left on clusters no longer in progress.
func (c *Conductor) Resync(ctx context.Context) error {
	clusters, err := c.store.ListClustersByStatus(ctx, magnum.StatusCreateInProgress, magnum.StatusUpdateInProgress, magnum.StatusDeleteInProgress)
	if err != nil {
		return err
	}
	active := make(map[string]bool, len(clusters))
	for _, cl := range clusters {
		// Another driver's cluster left in progress is that driver's: the bridge does not finish,
		// fail or time it out.
		d, why, err := c.driverOf(ctx, cl)
		if err != nil {
			return err
		}
		if d != templates.DriverBridge {
			c.noteForeign(ctx, cl, d, why)
			continue
		}
		active[cl.UUID.Or("")] = true
		c.resume(cl.UUID.Or(""))
	}
	if len(clusters) > 0 {
		c.log.InfoContext(ctx, "resync: operations in progress handed to the driver", "count", len(clusters))
	}
	if c.opts.Claims != nil {
		if err := c.opts.Claims.Sweep(ctx, func(id string) bool { return active[id] }); err != nil {
			c.log.WarnContext(ctx, "operation claims: sweep failed", "error", err)
		}
	}
	return nil
}
