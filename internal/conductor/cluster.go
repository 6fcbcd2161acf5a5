package conductor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// ClusterCreate implements cluster_create(cluster, master_count, node_count, create_timeout) as
// Magnum's cluster conductor does: the rows are inserted at once, so clients never
// see a 404 for an accepted cluster — a request refused after magnum-api's 202 still leaves a
// CREATE_FAILED row with the reason, as Python's conductor does. The cluster's cloud credentials are
// issued while the message is held (they need the request's token); the rest is the operation
// driver's (operations.go), and the watch reports progress.
func (c *Conductor) ClusterCreate(ctx context.Context, req *rpc.Request) (any, error) {
	cl := &magnum.Cluster{}
	if err := c.decodeView(req, "cluster", cl); err != nil {
		return nil, err
	}
	id, _ := cl.UUID.Get()
	if _, err := uuid.Parse(id); err != nil {
		return nil, rpc.InvalidArgs("cluster uuid %q is not a UUID", id)
	}
	project, _ := cl.ProjectID.Get()
	if err := authorize(req.Context, project); err != nil {
		return nil, err
	}
	steps := newStepTimer()
	defer func() {
		if c.log.Enabled(ctx, slog.LevelDebug) {
			c.log.DebugContext(ctx, "cluster_create handled", "cluster", id, "steps", steps.String())
		}
	}()
	// The tenant boundary comes from the row, not the message: a uuid that already names another
	// project's cluster is not this request's to touch.
	existing, err := c.store.GetCluster(ctx, id)
	steps.mark("lookup")
	switch {
	case err == nil:
		if existing.ProjectID.Or("") != project {
			return nil, authorizationFailure(fmt.Sprintf("cluster %s belongs to another project", id))
		}
		return nil, c.resumeCreate(ctx, existing, req)
	case !errors.Is(err, ErrNotFound):
		return nil, rpc.Retry(err)
	}
	masters, err := intArg(req, "master_count", 1)
	if err != nil {
		return nil, err
	}
	workers, err := intArg(req, "node_count", 1)
	if err != nil {
		return nil, err
	}
	timeout, err := intArg(req, "create_timeout", 60)
	if err != nil {
		return nil, err
	}
	var refusal error
	if masters < 1 || workers < 0 {
		refusal = invalidParameter(fmt.Sprintf("master_count %d / node_count %d out of range", masters, workers))
		masters, workers = max(masters, 1), max(workers, 0)
	}
	if timeout <= 0 {
		timeout = 60
	}
	templateID, _ := cl.ClusterTemplateID.Get()
	tmpl, err := c.store.GetClusterTemplate(ctx, templateID)
	steps.mark("template")
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			return nil, rpc.Retry(err)
		}
		// No row for this one: magnum-api cannot show a cluster whose template is gone — a row
		// naming it breaks `coe cluster list` for the whole project (HTTP 404 for the template).
		c.log.Warn("cluster_create refused: its template no longer exists; no row recorded", "cluster", id, "template", templateID)
		return nil, invalidParameter(fmt.Sprintf("cluster template %s does not exist", templateID))
	}
	in := c.renderInput(cl, tmpl, nil, nil)
	if refusal == nil {
		// Before any write: the flavor and the labels' values. A refusal is recorded as CREATE_FAILED
		// below and nothing is made, in the management cluster or in Keystone.
		refusal = templates.PreflightLabels(in)
	}
	now := c.opts.Now().UTC()
	cl.Status.Set(magnum.Transitions[magnum.OpClusterCreate].InProgress)
	cl.StatusReason.SetNull()
	cl.StackID.Set(templates.ClusterName(cl.Name.Or(""), id))
	cl.CreateTimeout.Set(int64(timeout))
	cl.CreatedAt.Set(now)
	master, worker := defaultNodeGroups(cl, tmpl, masters, workers)
	if refusal != nil {
		// Recorded, not just refused: magnum-api already answered 202 and its clients poll the row.
		reason := c.reasonFor(id, refusal)
		cl.Status.Set(magnum.Transitions[magnum.OpClusterCreate].Failed)
		cl.StatusReason.Set(reason)
		for _, g := range []*magnum.NodeGroup{master, worker} {
			g.Status.Set(magnum.Transitions[magnum.OpClusterCreate].Failed)
			g.StatusReason.Set(reason)
		}
	}
	if _, err := c.store.CreateCluster(ctx, cl, []*magnum.NodeGroup{master, worker}); err != nil {
		return nil, rpc.Retry(fmt.Errorf("insert cluster %s: %w", id, err))
	}
	steps.mark("insert")
	if refusal != nil {
		c.log.WarnContext(ctx, "cluster_create refused", "cluster", id, "error", refusal)
		return nil, nil
	}
	stored, err := c.store.GetCluster(ctx, id)
	if err != nil {
		return nil, rpc.Retry(err)
	}
	steps.mark("reread")
	// The Kubernetes version the cluster would get on its template's image (docs/labels.md, kube_tag)
	// once the row exists: magnum-api answered 202 already, and a client polling it (Terraform)
	// takes a 404 for a deleted cluster; the image is a call to Glance. A refusal fails the create
	// before anything is made.
	img := c.lookupImage(ctx, req.Context, project, in.Template.ImageID)
	steps.mark("image")
	if _, err := templates.Preflight(in, img, c.versionPolicy()); err != nil {
		return nil, c.failOperation(ctx, stored, magnum.StatusCreateInProgress, "", err)
	}
	err = c.resumeCreate(ctx, stored, req)
	steps.mark("claim+credentials")
	return nil, err
}

// resumeCreate continues a create whose rows exist: it issues the cloud credentials as the
// requesting user (held with retries while Keystone or the management cluster are unreachable, up
// to the create's deadline and maxMessageHold), then hands the cluster to the driver.
func (c *Conductor) resumeCreate(ctx context.Context, cl *magnum.Cluster, req *rpc.Request) error {
	id := cl.UUID.Or("")
	if cl.Status.Or("") != magnum.StatusCreateInProgress {
		c.log.InfoContext(ctx, "cluster_create: nothing to do", "cluster", id, "status", cl.Status.Or(""))
		return nil
	}
	// The claim first: a delete handled meanwhile by another replica waits for it, so no
	// credential is stored after that delete removed the cluster's.
	claimed, err := c.claim(ctx, id, magnum.StatusCreateInProgress)
	if err == nil && !claimed {
		err = errClaimHeld
	}
	if err == nil {
		err = c.ensureCreateCredentials(ctx, cl, req.Context)
	}
	if err == nil {
		c.enqueue(id)
		return nil
	}
	err = unwrapRetry(err)
	if permanent(err) {
		return c.failOperation(ctx, cl, magnum.StatusCreateInProgress, "", err)
	}
	held := req.FirstAttempt.IsZero() || c.opts.Now().Sub(req.FirstAttempt) < maxMessageHold
	if held && c.opts.Now().Before(c.deadline(cl, magnum.StatusCreateInProgress)) {
		return rpc.Retry(err)
	}
	if errors.Is(err, errClaimHeld) {
		// Another replica has driven this create all along (this was a redelivery): it is its to finish.
		c.log.WarnContext(ctx, "cluster_create: another replica holds the cluster's claim; leaving the create to it", "cluster", id)
		return nil
	}
	return c.failOperation(ctx, cl, magnum.StatusCreateInProgress, "could not issue the cluster's cloud credentials in time", err)
}

// ensureCreateCredentials is the part of a create that needs the requesting user: the project
// namespace and the cluster's application credentials stored in it.
func (c *Conductor) ensureCreateCredentials(ctx context.Context, cl *magnum.Cluster, caller *rpc.Context) error {
	if c.opts.Credentials == nil {
		return nil
	}
	ns := c.namespace(cl.ProjectID.Or(""))
	if err := c.kube.EnsureProjectNamespace(ctx, ns, cl.ProjectID.Or("")); err != nil {
		return err
	}
	if !serverGroupsAsCaller(caller) || c.opts.ServerGroups == nil || !c.onOpenStack(cl) {
		return c.ensureCloudCredentials(ctx, caller, cl, ns, cl.StackID.Or(""))
	}
	// The server groups too, as the user and while the credentials are made: the driver then
	// applies the Cluster without first authenticating as the new credential to make them.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.ensureCloudCredentials(gctx, caller, cl, ns, cl.StackID.Or("")) })
	g.Go(func() error {
		_, rendered, err := c.render(gctx, cl, nil)
		if err != nil {
			return nil // the driver renders again and fails the create with the reason
		}
		if err := c.ensureServerGroups(gctx, caller, cl, rendered.ServerGroups); err != nil {
			return err
		}
		c.ops.madeServerGroups(cl.UUID.Or(""), rendered.ServerGroups)
		return nil
	})
	return g.Wait()
}

// defaultNodeGroups builds default-master and default-worker as Magnum's conductor does, so the
// API shows the groups it would.
func defaultNodeGroups(cl *magnum.Cluster, tmpl *magnum.ClusterTemplate, masters, workers int) (*magnum.NodeGroup, *magnum.NodeGroup) {
	labels := dictMap(cl.Labels)
	volume := cl.DockerVolumeSize
	if !volume.IsSet() || volume.IsNull() {
		volume = tmpl.DockerVolumeSize
	}
	mk := func(name, role string, count int, flavor string) *magnum.NodeGroup {
		ng := &magnum.NodeGroup{}
		ng.UUID.Set(uuid.NewString())
		ng.Name.Set(name)
		ng.ClusterID.Set(cl.UUID.Or(""))
		ng.ProjectID.Set(cl.ProjectID.Or(""))
		ng.Labels.Set(cl.Labels.Or(magnum.Dict{}))
		ng.NodeCount.Set(int64(count))
		ng.ImageID.Set(tmpl.ImageID.Or(""))
		if v, ok := volume.Get(); ok {
			ng.DockerVolumeSize.Set(v)
		}
		ng.FlavorID.Set(flavor)
		ng.Role.Set(role)
		ng.IsDefault.Set(true)
		ng.MinNodeCount.Set(0)
		ng.NodeAddresses.Set([]string{})
		ng.StackID.Set(cl.StackID.Or(""))
		ng.Status.Set(magnum.Transitions[magnum.OpClusterCreate].NodeGroup)
		ng.CreatedAt.Set(cl.CreatedAt.Or(time.Time{}))
		return ng
	}
	master := mk("default-master", "master", masters, cmp.Or(cl.MasterFlavorID.Or(""), tmpl.MasterFlavorID.Or("")))
	worker := mk("default-worker", "worker", workers, cmp.Or(cl.FlavorID.Or(""), tmpl.FlavorID.Or("")))
	if v, ok := labels[templates.LabelMinNodeCount]; ok {
		var n int64
		if _, err := fmt.Sscan(v, &n); err == nil {
			worker.MinNodeCount.Set(n)
		}
	}
	if v, ok := labels[templates.LabelMaxNodeCount]; ok {
		var n int64
		if _, err := fmt.Sscan(v, &n); err == nil {
			worker.MaxNodeCount.Set(n)
		}
	}
	return master, worker
}

// render maps the cluster's rows (cluster, template, node groups) to what is applied.
func (c *Conductor) render(ctx context.Context, cl *magnum.Cluster, upgrade *templates.Upgrade) (templates.Input, *templates.Rendered, error) {
	tmpl, err := c.store.GetClusterTemplate(ctx, cl.ClusterTemplateID.Or(""))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return templates.Input{}, nil, &permanentError{fmt.Errorf("cluster template %s no longer exists", cl.ClusterTemplateID.Or(""))}
		}
		return templates.Input{}, nil, err
	}
	groups, err := c.store.ListNodeGroups(ctx, cl.UUID.Or(""))
	if err != nil {
		return templates.Input{}, nil, err
	}
	in := c.renderInput(cl, tmpl, groups, upgrade)
	if in.Cluster.AdoptedName, err = c.adoptedName(ctx, cl); err != nil {
		return in, nil, err
	}
	rendered, err := templates.Render(in)
	if err != nil {
		var le *templates.LabelError
		if errors.As(err, &le) {
			return in, nil, err
		}
		return in, nil, &permanentError{err}
	}
	return in, rendered, nil
}

// applyCluster renders and applies everything a cluster needs in the management cluster.
func (c *Conductor) applyCluster(ctx context.Context, cl *magnum.Cluster, caller *rpc.Context, upgrade *templates.Upgrade) error {
	id := cl.UUID.Or("")
	steps := newStepTimer()
	defer func() {
		if c.log.Enabled(ctx, slog.LevelDebug) {
			c.log.DebugContext(ctx, "cluster apply", "cluster", id, "steps", steps.String())
		}
	}()
	in, rendered, err := c.render(ctx, cl, upgrade)
	if err != nil {
		return err
	}
	// A move this replica took, or one another replica took before it went (its reason says so).
	_, moved := capi.MovingTo(cl.StatusReason.Or(""))
	moving := c.ops.moving(id) || cl.Status.Or("") == magnum.StatusUpdateInProgress && moved
	adopted, err := c.keepRendering(ctx, in, rendered, moving, upgrade != nil)
	if err != nil {
		return err
	}
	steps.mark("rows+render")
	if err := c.kube.EnsureProjectNamespace(ctx, in.Namespace, cl.ProjectID.Or("")); err != nil {
		return err
	}
	steps.mark("namespace")
	if err := c.ensureCertificateSecrets(ctx, cl, in.Namespace, rendered.Cluster.GetName()); err != nil {
		return err
	}
	steps.mark("certificates")
	if err := c.ensureCloud(ctx, caller, cl, in.Namespace, rendered); err != nil {
		return err
	}
	steps.mark("cloud")
	// After the credential: the flavors are looked up as the cluster's own.
	if err := c.annotateCapacity(ctx, cl, in, rendered); err != nil {
		return err
	}
	if err := c.kube.ApplyUnchanged(ctx, rendered.ClassObjects...); err != nil {
		return err
	}
	steps.mark("class")
	// The Cluster and its add-on set at once: CAPI's ClusterResourceSet controller binds whichever
	// comes second, and a failed half is applied again, with the other, by the retry.
	// An adopted cluster keeps the add-ons its old driver installed (the bridge's would be a second
	// network plugin and cloud controller manager): it names no add-on set to wait for.
	if !adopted {
		nameAddonSet(rendered)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.kube.Apply(gctx, rendered.Cluster) })
	g.Go(func() error {
		if adopted {
			return nil
		}
		return c.applyAddons(gctx, in, rendered, cl.Status.Or("") != magnum.StatusCreateInProgress)
	})
	err = g.Wait()
	steps.mark("cluster+addons")
	return err
}

// keepRendering gives a live cluster's apply the rendering the cluster has (templates.Rendered.Keep),
// so that no operation but an upgrade replaces its machines, whichever bridge built it. An upgrade
// this replica has in hand (upgrade) renders afresh, and so does one the rows record (the cluster's
// template is no longer the one its Cluster was rendered from) when it is resumed after a restart
// or elsewhere. An operator's move (move) takes this bridge's rendering with the cluster's
// Kubernetes version. An adopted cluster (adoption.go) keeps its own class for good: an upgrade
// changes its version and machine image within it, a move does not apply. adopted reports one.
func (c *Conductor) keepRendering(ctx context.Context, in templates.Input, rendered *templates.Rendered, move, upgrade bool) (adopted bool, err error) {
	live, found, err := c.kube.GetCluster(ctx, in.Namespace, rendered.Cluster.GetName())
	if err != nil || !found {
		return false, err
	}
	fresh := upgrade || live.Labels[templates.LabelTemplateUUID] != in.Template.UUID
	keep := rendered.Keep
	switch {
	case templates.IsAdopted(live) && fresh:
		keep = rendered.KeepAdopted
	case templates.IsAdopted(live):
	case fresh:
		return false, nil
	case move:
		keep = rendered.KeepVersion
	}
	if err := keep(live); err != nil {
		return false, &permanentError{err}
	}
	return templates.IsAdopted(live), nil
}

// adoptedName is the Cluster API name of a cluster the bridge adopted (its stack_id), or "" for
// the bridge's own (named by templates.ClusterName).
func (c *Conductor) adoptedName(ctx context.Context, cl *magnum.Cluster) (string, error) {
	row := templates.ClusterRow{UUID: cl.UUID.Or(""), Name: cl.Name.Or(""), StackID: cl.StackID.Or("")}
	if d, _ := templates.DriverOf(row); d == templates.DriverBridge {
		return "", nil
	}
	from, err := c.adoptedFrom(ctx, cl, templates.DriverCAPIHelm)
	if err != nil || from == "" {
		return "", err
	}
	return cl.StackID.Or(""), nil
}

// ensureCloud makes what the cluster needs in the cloud before CAPO acts: its credentials, then its
// server groups as the stored credential — unless this operation's handler already made these very
// groups as the requesting user (ensureCreateCredentials), which saves the credential's token
// request and Nova's check of that token before the Cluster is applied.
func (c *Conductor) ensureCloud(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster, namespace string, rendered *templates.Rendered) error {
	if err := c.ensureCloudCredentials(ctx, caller, cl, namespace, rendered.Cluster.GetName()); err != nil {
		return err
	}
	if c.ops.serverGroupsMade(cl.UUID.Or(""), rendered.ServerGroups) {
		return nil
	}
	return c.ensureServerGroups(ctx, caller, cl, rendered.ServerGroups)
}

// ensureCertificateSecrets generates and stores the cluster's CAs once and gives them to CAPI as
// Secrets; later runs load them back, so a redelivered create never replaces a CA the cluster
// already trusts. A new set goes under refs derived from the cluster's uuid, together with the
// cluster row's refs to it, in one transaction (certs.StoreNewCluster): an attempt that dies
// before the commit leaves nothing; one that dies after it leaves the set and the refs, which the
// next attempt loads. The new set's Secrets are applied while it is stored: CAPI reads them only
// once the Cluster exists, which is applied after both, so Secrets of a set that failed to store
// are overwritten by the next attempt's before anything used them; and when another attempt's set
// was stored first, that set is applied over ours.
func (c *Conductor) ensureCertificateSecrets(ctx context.Context, cl *magnum.Cluster, namespace, clusterName string) error {
	issuer := cmp.Or(cl.Name.Or(""), cl.UUID.Or(""))
	apply := func(ctx context.Context, pki *certs.ClusterPKI) error {
		secrets, err := pki.CAPISecrets(clusterName)
		if err != nil {
			return &permanentError{err}
		}
		return c.kube.ApplyClusterSecrets(ctx, namespace, cl.UUID.Or(""), secrets)
	}
	if refs := refsOf(cl); refs.CACertRef != "" {
		pki, err := c.certs.LoadCluster(ctx, refs, issuer)
		if err != nil {
			return err
		}
		return apply(ctx, pki)
	}
	fresh, err := certs.GenerateClusterWithOptions(issuer, c.opts.Generate)
	if err != nil {
		return err
	}
	var stored *certs.ClusterPKI
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		stored, err = c.certs.StoreNewCluster(gctx, cl.UUID.Or(""), fresh, certs.Owner{ProjectID: cl.ProjectID.Or(""), UserID: cl.UserID.Or("")})
		return err
	})
	g.Go(func() error { return apply(gctx, fresh) })
	if err := g.Wait(); err != nil {
		return err
	}
	if stored != fresh {
		return apply(ctx, stored)
	}
	return nil
}

func refsOf(cl *magnum.Cluster) certs.Refs {
	return certs.Refs{CACertRef: cl.CACertRef.Or(""), EtcdCACertRef: cl.EtcdCACertRef.Or(""),
		FrontProxyCACertRef: cl.FrontProxyCACertRef.Or(""), MagnumCertRef: cl.MagnumCertRef.Or(""), ClusterUUID: cl.UUID.Or("")}
}

func (c *Conductor) namespace(projectID string) string {
	return templates.NamespaceFor(c.opts.NamespacePrefix, projectID)
}

// renderInput converts Magnum's rows into the mapping's input; upgrade carries a cluster_upgrade's
// rollout settings to the apply that starts it (nil otherwise: CAPI's default rollout).
func (c *Conductor) renderInput(cl *magnum.Cluster, tmpl *magnum.ClusterTemplate, groups []*magnum.NodeGroup, upgrade *templates.Upgrade) templates.Input {
	in := templates.Input{
		Flavor:         c.opts.Flavor,
		AllowedFlavors: c.opts.AllowedFlavors,
		Namespace:      c.namespace(cl.ProjectID.Or("")),
		Template: templates.Template{
			UUID: tmpl.UUID.Or(""), Name: tmpl.Name.Or(""), ImageID: tmpl.ImageID.Or(""), FlavorID: tmpl.FlavorID.Or(""),
			MasterFlavorID: tmpl.MasterFlavorID.Or(""), KeypairID: tmpl.KeypairID.Or(""), ExternalNetworkID: tmpl.ExternalNetworkID.Or(""),
			FixedNetwork: tmpl.FixedNetwork.Or(""), FixedSubnet: tmpl.FixedSubnet.Or(""), DNSNameserver: tmpl.DNSNameserver.Or(""),
			NetworkDriver: tmpl.NetworkDriver.Or(""), VolumeDriver: tmpl.VolumeDriver.Or(""), DockerVolumeSize: int(tmpl.DockerVolumeSize.Or(0)),
			MasterLBEnabled: tmpl.MasterLBEnabled.Or(false), FloatingIPEnabled: tmpl.FloatingIPEnabled.Or(true),
			TLSDisabled: tmpl.TLSDisabled.Or(false), Labels: dictMap(tmpl.Labels),
			HTTPProxy: tmpl.HTTPProxy.Or(""), HTTPSProxy: tmpl.HTTPSProxy.Or(""), NoProxy: tmpl.NoProxy.Or(""),
		},
		Cluster: templates.Cluster{
			UUID: cl.UUID.Or(""), Name: cl.Name.Or(""), ProjectID: cl.ProjectID.Or(""), Keypair: cl.Keypair.Or(""),
			MasterFlavorID: cl.MasterFlavorID.Or(""), FlavorID: cl.FlavorID.Or(""), Labels: dictMap(cl.Labels),
		},
		DefaultKubernetesVersion: c.opts.DefaultKubernetesVersion,
		Upgrade:                  upgrade,
		RenderedBy:               c.opts.BridgeVersion,
	}
	for _, g := range groups {
		if magnum.Deleting(g.Status.Or("")) {
			continue // a group being deleted leaves the topology; CAPI removes its machines
		}
		ng := templates.NodeGroup{
			UUID: g.UUID.Or(""), Name: g.Name.Or(""), Role: g.Role.Or(""), NodeCount: int(g.NodeCount.Or(0)),
			MinNodeCount: int(g.MinNodeCount.Or(0)), FlavorID: g.FlavorID.Or(""), ImageID: g.ImageID.Or(""),
			Labels: dictMap(g.Labels), NodeLabels: dictMap(g.NodeLabels), IsDefault: g.IsDefault.Or(false),
		}
		if m, ok := g.MaxNodeCount.Get(); ok {
			n := int(m)
			ng.MaxNodeCount = &n
		}
		for _, t := range g.NodeTaints.Or(nil) {
			m := t.Map()
			ng.NodeTaints = append(ng.NodeTaints, templates.Taint{Key: m["key"], Value: m["value"], Effect: m["effect"]})
		}
		in.NodeGroups = append(in.NodeGroups, ng)
	}
	return in
}

// ClusterDelete implements cluster_delete(uuid): DELETE_IN_PROGRESS at once, then the driver
// deletes the CAPI Cluster and, once it is gone, everything the bridge owns (finishDelete).
// Deleting a cluster that is already gone is a no-op, so redeliveries are harmless; deleting one
// already being deleted resumes the delete (and restarts its deadline).
func (c *Conductor) ClusterDelete(ctx context.Context, req *rpc.Request) (any, error) {
	id, err := stringArg(req, "uuid")
	if err != nil {
		return nil, err
	}
	cl, err := c.store.GetCluster(ctx, id)
	if errors.Is(err, ErrNotFound) {
		if req.IsCall {
			return nil, clusterNotFound(id)
		}
		return nil, nil
	}
	if err != nil {
		return nil, rpc.Retry(err)
	}
	if err := authorize(req.Context, cl.ProjectID.Or("")); err != nil {
		return nil, err
	}
	if err := c.refuseForeign(ctx, cl); err != nil {
		return nil, err
	}
	deleting := magnum.Transitions[magnum.OpClusterDelete].InProgress
	empty := ""
	if err := c.store.UpdateCluster(ctx, id, ClusterUpdate{Status: &deleting, StatusReason: &empty}); err != nil {
		return nil, rpc.Retry(err)
	}
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return nil, rpc.Retry(err)
	}
	for _, g := range groups {
		if err := c.store.UpdateNodeGroup(ctx, g.UUID.Or(""), NodeGroupUpdate{ClusterUUID: id, Status: &deleting, StatusReason: &empty}); err != nil {
			return nil, rpc.Retry(err)
		}
	}
	c.ops.begin(id, c.opts.Now())
	c.enqueue(id)
	return nil, nil
}

// finishDelete removes what the bridge owns for a deleted cluster: certificates (all four, where
// Magnum leaks two), its add-on ClusterResourceSet, the CAPI secrets it wrote, then the node group rows and the cluster row.
//
// The cloud credentials are revoked first (CAPO needed them until its machines were gone, and their
// Secret names them). A credential Keystone will not let the bridge delete is reported as
// DELETE_FAILED with the credential's name rather than left behind silently; deleting the cluster
// again retries.
func (c *Conductor) finishDelete(ctx context.Context, cl *magnum.Cluster, caller *rpc.Context) error {
	id := cl.UUID.Or("")
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return rpc.Retry(err)
	}
	if err := c.deleteServerGroups(ctx, cl, groups); err != nil {
		if !permanent(err) {
			return rpc.Retry(err)
		}
		// Left in the project, visible to the tenant by name; not worth keeping the cluster for.
		c.log.WarnContext(ctx, "cluster delete: server groups left in Nova", "cluster", id, "error", err)
	}
	if err := c.releaseFloatingIPs(ctx, cl); err != nil {
		if !permanent(err) {
			return rpc.Retry(err)
		}
		c.log.WarnContext(ctx, "cluster delete: floating IPs left in Neutron", "cluster", id, "error", err)
	}
	if err := c.revokeCloudCredentials(ctx, caller, cl); err != nil {
		if !permanent(err) {
			return rpc.Retry(err)
		}
		reason := c.reasonFor(id, err)
		failed := magnum.Transitions[magnum.OpClusterDelete].Failed
		c.log.WarnContext(ctx, "cluster delete: credentials left in Keystone", "cluster", id, "error", err)
		if err := c.store.UpdateCluster(ctx, id, ClusterUpdate{Status: &failed, StatusReason: &reason}); err != nil {
			return rpc.Retry(err)
		}
		return nil
	}
	if err := c.certs.DeleteCluster(ctx, refsOf(cl)); err != nil && !errors.Is(err, certs.ErrKeyPairNotFound) && !errors.Is(err, certs.ErrMissingRef) {
		return rpc.Retry(fmt.Errorf("delete certificates of %s: %w", id, err))
	}
	ns, err := c.placeOf(ctx, cl)
	if err != nil {
		return rpc.Retry(err)
	}
	if err := c.kube.DeleteAddons(ctx, ns, id); err != nil {
		return rpc.Retry(err)
	}
	if err := c.deleteAutoscaler(ctx, ns, id); err != nil {
		return rpc.Retry(err)
	}
	if from, err := c.takenOverFrom(ctx, cl); err != nil {
		return rpc.Retry(err)
	} else if from != "" {
		// What magnum-cluster-api made beside the Cluster, by name; its credential Secret last
		// among them, as it marks the cluster taken over (adoptedFrom) until the row is gone.
		if err := c.kube.DeleteLeftovers(ctx, ns, templates.ClusterAPILeftoversOf(cl.StackID.Or(""), id)); err != nil {
			return rpc.Retry(err)
		}
	}
	if err := c.kube.DeleteClusterSecrets(ctx, ns, id); err != nil {
		return rpc.Retry(err)
	}
	if err := c.store.DeleteCluster(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return rpc.Retry(err)
	}
	c.ops.end(id)
	c.afterDelete(id, ns, cl.StackID.Or(""))
	c.log.InfoContext(ctx, "cluster deleted", "cluster", id)
	return nil
}

// dictMap reads a dict field as a Go map; absent or null is empty.
func dictMap(o magnum.Opt[magnum.Dict]) map[string]string {
	d, _ := o.Get()
	m := d.Map()
	if m == nil {
		m = map[string]string{}
	}
	return m
}
