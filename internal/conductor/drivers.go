package conductor

import (
	"context"
	"fmt"

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
// the bridge adopted (adoption.go) is the bridge's: its Cluster says so, read once per process.
// The error is the management cluster's, when it cannot tell whether a cluster was adopted.
func (c *Conductor) driverOf(ctx context.Context, cl *magnum.Cluster) (templates.Driver, string, error) {
	row := templates.ClusterRow{UUID: cl.UUID.Or(""), Name: cl.Name.Or(""), StackID: cl.StackID.Or("")}
	if d, why := templates.DriverOf(row); d == templates.DriverBridge {
		return d, why, nil
	}
	if tmpl, err := c.store.GetClusterTemplate(ctx, cl.ClusterTemplateID.Or("")); err == nil {
		row.TemplateDriver = tmpl.Driver.Or("")
	}
	d, why := templates.DriverOf(row)
	if d != templates.DriverCAPIHelm || row.StackID == "" {
		return d, why, nil
	}
	from, err := c.adoptedFrom(ctx, cl)
	if err != nil {
		return d, why, err
	}
	if from != "" {
		return templates.DriverBridge, "adopted from " + from + " (its Cluster " + row.StackID + " says so)", nil
	}
	return d, why, nil
}

// adoptedFrom is the driver an adopted cluster was taken over from, or "" for one not adopted.
// Adoption is never undone, so a cluster seen adopted is remembered.
func (c *Conductor) adoptedFrom(ctx context.Context, cl *magnum.Cluster) (string, error) {
	id := cl.UUID.Or("")
	if from, ok := c.adopted.Load(id); ok {
		return from.(string), nil
	}
	live, found, err := c.kube.GetCluster(ctx, c.namespace(cl.ProjectID.Or("")), cl.StackID.Or(""))
	if err != nil || !found {
		return "", err
	}
	from := live.Annotations[templates.AnnotationAdoptedFrom]
	if from != "" && live.Spec.Topology.IsDefined() {
		c.adopted.Store(id, from)
		return from, nil
	}
	return "", nil
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
		next = "keep a magnum-conductor with " + string(d) + " for it: the bridge does not take over its clusters yet"
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
