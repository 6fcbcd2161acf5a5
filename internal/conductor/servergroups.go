package conductor

import (
	"context"
	"fmt"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// ServerGroups creates and removes the Nova server groups a cluster's machines are placed in (the
// OpenStack flavor's anti-affinity), acting as the cluster's own CAPO credential (implemented in
// internal/app over internal/compute).
type ServerGroups interface {
	// Ensure creates the missing groups; existing ones with the same policy are kept.
	Ensure(ctx context.Context, cloudsYAML, caCert []byte, groups []templates.ServerGroup) error
	// EnsureAsCaller does the same as the request's user, with the token (and its body) magnum-api
	// passed on, in the cluster's project: no token request before the groups, so they are made
	// while the cluster's credentials are (CAPO finds them by name in the project either way).
	EnsureAsCaller(ctx context.Context, caller *rpc.Context, projectID string, groups []templates.ServerGroup) error
	// Delete removes the named groups; names that do not exist are fine.
	Delete(ctx context.Context, cloudsYAML, caCert []byte, names []string) error
}

// FloatingIPs releases what CAPO leaves in Neutron for a deleted cluster (implemented in
// internal/app over internal/compute): the API server's floating IP when no control-plane server
// ever held it.
type FloatingIPs interface {
	// ReleaseLeftovers deletes the cluster's unattached floating IPs (clusterResourceName: CAPO's
	// "<namespace>-<name>") and returns their addresses.
	ReleaseLeftovers(ctx context.Context, cloudsYAML, caCert []byte, clusterResourceName string) ([]string, error)
}

// onOpenStack reports whether the cluster's machines are CAPO's, which call the cloud.
func (c *Conductor) onOpenStack(cl *magnum.Cluster) bool {
	return templates.SelectedFlavor(dictMap(cl.Labels), c.opts.Flavor) == templates.FlavorOpenStack
}

// releaseFloatingIPs runs after the CAPI cluster is gone, while its credential still exists.
func (c *Conductor) releaseFloatingIPs(ctx context.Context, cl *magnum.Cluster) error {
	if c.opts.FloatingIPs == nil || !c.onOpenStack(cl) {
		return nil
	}
	clouds, ca, found, err := c.capoCloudConfig(ctx, cl)
	if err != nil || !found {
		return err // without a credential CAPO created nothing either
	}
	ns, err := c.placeOf(ctx, cl)
	if err != nil {
		return err
	}
	released, err := c.opts.FloatingIPs.ReleaseLeftovers(ctx, clouds, ca, ns+"-"+cl.StackID.Or(""))
	if len(released) > 0 {
		c.log.InfoContext(ctx, "cluster delete: released the floating IPs CAPO left", "cluster", cl.UUID.Or(""), "addresses", released)
	}
	if err != nil {
		return cloudError("releasing the cluster's floating IPs failed", err)
	}
	return nil
}

// capoCloudConfig is the stored clouds.yaml and CA bundle CAPO authenticates with.
func (c *Conductor) capoCloudConfig(ctx context.Context, cl *magnum.Cluster) (clouds, caCert []byte, found bool, err error) {
	data, found, err := c.readCloudConfig(ctx, cl)
	if err != nil || !found {
		return nil, nil, found, err
	}
	return data[cloudsYAMLKey], data[cloudCACertKey], true, nil
}

// serverGroupsAsCaller reports whether the request's own token can make the server groups.
func serverGroupsAsCaller(caller *rpc.Context) bool {
	return caller != nil && caller.AuthToken != "" && len(caller.AuthTokenInfo) > 0
}

// ensureServerGroups makes the rendered server groups exist before CAPO creates machines in them:
// as the request's user when it carries a token (serverGroupsAsCaller), else as the cluster's CAPO
// credential, which must be stored by then.
func (c *Conductor) ensureServerGroups(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster, groups []templates.ServerGroup) error {
	if c.opts.ServerGroups == nil || len(groups) == 0 {
		return nil
	}
	if serverGroupsAsCaller(caller) {
		if err := c.opts.ServerGroups.EnsureAsCaller(ctx, caller, cl.ProjectID.Or(""), groups); err != nil {
			return cloudError("creating the cluster's Nova server groups failed", err)
		}
		return nil
	}
	clouds, ca, found, err := c.capoCloudConfig(ctx, cl)
	if err != nil {
		return err
	}
	if !found {
		return &permanentError{fmt.Errorf("the cluster has no cloud credential to create its server groups with")}
	}
	if err := c.opts.ServerGroups.Ensure(ctx, clouds, ca, groups); err != nil {
		return cloudError("creating the cluster's Nova server groups failed", err)
	}
	return nil
}

// deleteServerGroups removes the server groups of the given node groups (all of a deleted
// cluster's, or one deleted node group's). It runs while the cluster's credential still exists.
func (c *Conductor) deleteServerGroups(ctx context.Context, cl *magnum.Cluster, groups []*magnum.NodeGroup) error {
	if c.opts.ServerGroups == nil || len(groups) == 0 || !c.onOpenStack(cl) {
		return nil
	}
	clouds, ca, found, err := c.capoCloudConfig(ctx, cl)
	if err != nil || !found {
		return err // without a credential there is nobody to delete them as; nothing was created either
	}
	var ngs []templates.NodeGroup
	for _, g := range groups {
		ngs = append(ngs, templates.NodeGroup{UUID: g.UUID.Or(""), Name: g.Name.Or(""), Role: g.Role.Or("")})
	}
	names := templates.ServerGroupNames(cl.StackID.Or(""), ngs)
	if from, err := c.takenOverFrom(ctx, cl); err != nil {
		return err
	} else if from != "" {
		names = templates.ClusterAPIServerGroupNames(cl.StackID.Or(""), ngs)
	}
	if err := c.opts.ServerGroups.Delete(ctx, clouds, ca, names); err != nil {
		return cloudError("deleting the cluster's Nova server groups failed", err)
	}
	return nil
}
