package compute

import (
	"context"
	"errors"
	"net/http"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
)

// Flavor is what the bridge reads of a Nova flavor: the size of a node of it, which the
// autoscaler is told so that it can scale a node group up from zero machines.
type Flavor struct {
	ID, Name string
	VCPUs    int
	RAMMiB   int
	DiskGiB  int
	// ExtraSpecs carry GPUs (resources:VGPU, pci_passthrough:alias).
	ExtraSpecs map[string]string
}

// flavorExtraSpecsMicroversion is the first Nova microversion that shows a flavor's extra specs
// in its body, which saves a request per flavor.
const flavorExtraSpecsMicroversion = "2.61"

// FindFlavor looks a flavor up as the client's identity, as magnum-api resolves a template's
// flavor_id: by ID, else by name (Magnum stores whichever the tenant gave). A missing flavor is an
// *Error matching ErrNotFound.
func (c *Client) FindFlavor(ctx context.Context, ref string) (*Flavor, error) {
	nova := *c.compute
	nova.Microversion = flavorExtraSpecsMicroversion
	op := "look up flavor " + ref
	f, err := flavors.Get(ctx, &nova, ref).Extract()
	if err == nil {
		return flavorOf(f), nil
	}
	if e := newError(op, "", err, c.scrub...); !errors.Is(e, ErrNotFound) {
		return nil, e
	}
	pages, err := flavors.ListDetail(&nova, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(ctx)
	if err != nil {
		return nil, newError(op, "", err, c.scrub...)
	}
	all, err := flavors.ExtractFlavors(pages)
	if err != nil {
		return nil, newError(op, "", err, c.scrub...)
	}
	// Nova keeps flavor names unique.
	for i := range all {
		if all[i].Name == ref {
			return flavorOf(&all[i]), nil
		}
	}
	return nil, &Error{Op: op, StatusCode: http.StatusNotFound, Message: "no flavor of that ID or name"}
}

func flavorOf(f *flavors.Flavor) *Flavor {
	return &Flavor{ID: f.ID, Name: f.Name, VCPUs: f.VCPUs, RAMMiB: f.RAM, DiskGiB: f.Disk, ExtraSpecs: f.ExtraSpecs}
}
