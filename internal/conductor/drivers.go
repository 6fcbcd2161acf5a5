package conductor

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// A Magnum database the bridge takes over holds the clusters other drivers built: Heat stacks,
// magnum-capi-helm releases, magnum-cluster-api clusters. The bridge acts on its own only: any
// request about another driver's cluster is refused with NotSupported naming that driver, and
// nothing about it changes — no status, no object in the management cluster (it would otherwise
// build a second cluster for the row). templates.DriverOf tells them apart.

// driverOf is the driver that built cl, and why; the template is read only for a cluster whose
// stack_id is not the bridge's (its driver column names the others'). A magnum-capi-helm cluster
// the bridge adopted, or a magnum-cluster-api cluster it took over (adoption.go), is the bridge's:
// its Cluster says so, read once per process. The error is the management cluster's, when it
// cannot tell whether a cluster was adopted.
func (c *Conductor) driverOf(ctx context.Context, cl *magnum.Cluster) (templates.Driver, string, error) {
	row := templates.ClusterRow{UUID: cl.UUID.Or(""), Name: cl.Name.Or(""), StackID: cl.StackID.Or("")}
	if d, why := templates.DriverOf(row); d == templates.DriverBridge {
		return d, why, nil
	}
	if from, ok := c.adopted.Load(row.UUID); ok {
		// Seen adopted before (adoptedFrom): no read of the template or the management cluster.
		return templates.DriverBridge, adoptedWhy(from.(string), row.StackID), nil
	}
	if tmpl, err := c.store.GetClusterTemplate(ctx, cl.ClusterTemplateID.Or("")); err == nil {
		row.TemplateDriver = tmpl.Driver.Or("")
	}
	d, why := templates.DriverOf(row)
	if (d != templates.DriverCAPIHelm && d != templates.DriverClusterAPI) || row.StackID == "" {
		return d, why, nil
	}
	from, err := c.adoptedFrom(ctx, cl, d)
	switch {
	case err != nil:
		return d, why, err
	case from != "":
		return templates.DriverBridge, adoptedWhy(from, row.StackID), nil
	}
	return d, why, nil
}

// adoptedWhy is driverOf's reason for a cluster adopted, or taken over, from another driver.
func adoptedWhy(from, stackID string) string {
	if from == string(templates.DriverClusterAPI) {
		return "taken over from " + from + " (its Cluster " + stackID + " says so)"
	}
	return "adopted from " + from + " (its Cluster " + stackID + " says so)"
}

// adoptedFrom is the driver an adopted cluster was taken over from, or "" for one not adopted; d
// is the driver that built it, which tells where its Cluster is. Adoption is never undone, so a
// cluster seen adopted is remembered.
func (c *Conductor) adoptedFrom(ctx context.Context, cl *magnum.Cluster, d templates.Driver) (string, error) {
	id := cl.UUID.Or("")
	if from, ok := c.adopted.Load(id); ok {
		return from.(string), nil
	}
	ns, name := c.namespace(cl.ProjectID.Or("")), cl.StackID.Or("")
	if d == templates.DriverClusterAPI {
		ns = templates.ClusterAPINamespace
	}
	live, found, err := c.kube.GetCluster(ctx, ns, name)
	if err != nil {
		return "", err
	}
	if found {
		from := live.Annotations[templates.AnnotationAdoptedFrom]
		if from != "" && live.Spec.Topology.IsDefined() {
			c.adopted.Store(id, from)
			return from, nil
		}
		return "", nil
	}
	if d != templates.DriverClusterAPI {
		return "", nil
	}
	// A taken-over cluster's delete outlives its Cluster (a restart between the two): its
	// credential Secret, which the take-over gave the bridge's credential refs, says so until the
	// delete's last step. A namespace never handed over is not readable: nothing was taken over.
	data, found, err := c.kube.ReadSecret(ctx, ns, templates.CloudConfigSecretName(name))
	switch {
	case apierrors.IsForbidden(err) || !found:
		return "", nil
	case err != nil:
		return "", err
	case len(data[credentialRefsKey]) == 0:
		return "", nil
	}
	from := string(templates.DriverClusterAPI)
	c.adopted.Store(id, from)
	return from, nil
}

// placeOf is the namespace of the cluster's Cluster API objects: its project's, or, for a cluster
// taken over from magnum-cluster-api, that driver's shared namespace.
func (c *Conductor) placeOf(ctx context.Context, cl *magnum.Cluster) (string, error) {
	if from, err := c.takenOverFrom(ctx, cl); err != nil || from != "" {
		return templates.ClusterAPINamespace, err
	}
	return c.namespace(cl.ProjectID.Or("")), nil
}

// takenOverFrom is templates.DriverClusterAPI for a cluster the bridge took over from it (for its
// status, CA and delete only), "" for every other cluster.
func (c *Conductor) takenOverFrom(ctx context.Context, cl *magnum.Cluster) (templates.Driver, error) {
	if _, _, err := c.driverOf(ctx, cl); err != nil {
		return "", err
	}
	if from, ok := c.adopted.Load(cl.UUID.Or("")); ok && from == string(templates.DriverClusterAPI) {
		return templates.DriverClusterAPI, nil
	}
	return "", nil
}

// refuseTakenOver is Magnum's NotSupported for a change (what: "Resizing a cluster") to a
// cluster taken over from magnum-cluster-api: its ClusterClass stays the old driver's, whose
// patches and variables the bridge does not render.
func (c *Conductor) refuseTakenOver(ctx context.Context, cl *magnum.Cluster, what string) error {
	from, err := c.takenOverFrom(ctx, cl)
	if err != nil {
		return rpc.Retry(fmt.Errorf("telling whether cluster %s was taken over: %w", cl.UUID.Or(""), err))
	}
	if from == "" {
		return nil
	}
	return magnum.NotSupportedMessage(fmt.Sprintf("%s is not supported for cluster %s: magnum-capi-bridge took it over from %s for its status, "+
		"`coe cluster config` and delete only, and it keeps that driver's ClusterClass; delete it, or create a new cluster with a template of the bridge's.",
		what, cl.UUID.Or(""), from))
}

// refuseForeign is nil for the bridge's own clusters and Magnum's NotSupported for the others'.
func (c *Conductor) refuseForeign(ctx context.Context, cl *magnum.Cluster) error {
	d, why, err := c.driverOf(ctx, cl)
	if err != nil {
		return rpc.Retry(fmt.Errorf("telling whether cluster %s was adopted: %w", cl.UUID.Or(""), err))
	}
	if d == templates.DriverBridge {
		return nil
	}
	c.noteForeign(ctx, cl, d, why)
	return magnum.NotSupportedMessage(foreignMessage(cl.UUID.Or(""), d, why))
}

// foreignMessage says whose the cluster is and what the operator can do; its first sentence (what
// the CLI prints) names the driver.
func foreignMessage(id string, d templates.Driver, why string) string {
	var next string
	switch d {
	case templates.DriverHeat:
		next = "keep a magnum-conductor with Magnum's Heat driver for it, or delete its Heat stack"
	case templates.DriverCAPIHelm:
		next = "an operator can adopt it into the bridge (magnum-capi-bridge adoption plan, then adoption run), or keep a magnum-conductor with " + string(d) + " for it"
	case templates.DriverClusterAPI:
		next = "an operator can take it over into the bridge for its status, kubeconfig and delete (magnum-capi-bridge adoption plan, then adoption run), or keep a magnum-conductor with " + string(d) + " for it"
	default:
		next = "keep the conductor that built it"
	}
	return fmt.Sprintf("Cluster %s was built by the %s driver, not by magnum-capi-bridge: the bridge does not act on it (%s); %s.", id, d, why, next)
}

func (c *Conductor) noteForeign(ctx context.Context, cl *magnum.Cluster, d templates.Driver, why string) {
	if _, seen := c.foreignNoted.LoadOrStore(cl.UUID.Or(""), true); seen {
		return
	}
	c.log.WarnContext(ctx, "a cluster another driver built is left alone", "cluster", cl.UUID.Or(""), "driver", string(d),
		"why", why, "status", string(cl.Status.Or("")))
}
