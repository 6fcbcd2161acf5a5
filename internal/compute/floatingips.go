package compute

import (
	"context"
	"errors"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
)

// capoFloatingIPDescription is how CAPO v0.14 describes the floating IPs it allocates for a cluster
// (pkg/cloud/services/networking: "Created by cluster-api-provider-openstack cluster <namespace>-<name>").
const capoFloatingIPDescription = "Created by cluster-api-provider-openstack cluster "

// ReleaseLeftoverFloatingIPs deletes the unattached floating IPs CAPO allocated for a cluster that
// is gone (clusterResourceName: CAPO's "<namespace>-<name>"). CAPO deletes the API server's address
// only through the control-plane server holding it, so when no server ever did — a quota refusal,
// an image that failed, a create deleted early — the address stays, counting against the tenant's
// floating IP quota. An address still attached to a port is somebody's and is left alone. It
// returns the addresses released.
func (c *Client) ReleaseLeftoverFloatingIPs(ctx context.Context, clusterResourceName string) ([]string, error) {
	neutron, err := openstack.NewNetworkV2(c.provider, c.endpoint)
	if err != nil {
		return nil, newError("find Neutron", "", err, c.scrub...)
	}
	description := capoFloatingIPDescription + clusterResourceName
	pages, err := floatingips.List(neutron, floatingips.ListOpts{ProjectID: c.projectID, Description: description}).AllPages(ctx)
	if err != nil {
		return nil, newError("list the floating IPs of "+clusterResourceName, "", err, c.scrub...)
	}
	fips, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		return nil, newError("list the floating IPs of "+clusterResourceName, "", err, c.scrub...)
	}
	var released []string
	for _, fip := range fips {
		if fip.Description != description || fip.PortID != "" {
			continue // Neutron without the description filter, or still attached
		}
		err := newError(fmt.Sprintf("release floating IP %s (%s)", fip.FloatingIP, fip.ID), "",
			floatingips.Delete(ctx, neutron, fip.ID).ExtractErr(), c.scrub...)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return released, err
		}
		released = append(released, fip.FloatingIP)
	}
	return released, nil
}
