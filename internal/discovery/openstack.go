package discovery

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumetypes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/regions"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/osclient"
)

// OpenStackCloud gathers Facts with gophercloud as one identity (Magnum's service user): what any
// project member could see, since only public flavors, images and templates are listed.
type OpenStackCloud struct {
	Auth keystone.PasswordAuth
	// Region selects the Nova, Glance and Cinder endpoints; empty: the catalog's first.
	Region string
	// HTTPClient carries TLS trust and timeouts; nil: a client with keystone.DefaultRequestTimeout.
	HTTPClient *http.Client
	// Templates lists Magnum's public cluster templates (Magnum's database); nil: none.
	Templates func(context.Context) ([]Template, error)
}

// Facts asks the cloud. Keystone, Nova and Glance must answer; Cinder is optional (absent from
// the catalog: no volume types).
func (c OpenStackCloud) Facts(ctx context.Context) (Facts, error) {
	hc := c.HTTPClient
	if hc == nil {
		// The service user's own TLS settings, as keystone.NewPasswordClient applies them.
		var err error
		if hc, err = keystone.HTTPClient(c.Auth.CAFile, c.Auth.Insecure); err != nil {
			return Facts{}, err
		}
	}
	provider, err := osclient.NewProvider(c.Auth.AuthURL, hc, "")
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: Keystone URL: %w", err)
	}
	ao := tokens.AuthOptions{UserID: c.Auth.UserID, Username: c.Auth.Username, Password: c.Auth.Password.Reveal()}
	if c.Auth.UserID == "" {
		ao.DomainID, ao.DomainName = c.Auth.UserDomainID, c.Auth.UserDomainName
	}
	ao.Scope = tokens.Scope{ProjectID: c.Auth.ProjectID}
	if c.Auth.ProjectID == "" {
		ao.Scope = tokens.Scope{ProjectName: c.Auth.ProjectName, DomainID: c.Auth.ProjectDomainID, DomainName: c.Auth.ProjectDomainName}
	}
	if err := openstack.AuthenticateV3(ctx, provider, &ao, gophercloud.EndpointOpts{}); err != nil {
		// keystone's scrubbing: the password never reaches the error.
		return Facts{}, &keystone.Error{Op: "discovery: authenticate the service user", Message: osclient.Scrub(err.Error(), c.Auth.Password.Reveal())}
	}
	var f Facts
	result, ok := provider.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return Facts{}, fmt.Errorf("discovery: unexpected authentication result %T", provider.GetAuthResult())
	}
	catalog, err := result.ExtractServiceCatalog()
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: read the catalog: %w", err)
	}
	hasVolume := false
	for _, e := range catalog.Entries {
		switch e.Type {
		case "container-infra":
			for _, ep := range e.Endpoints {
				if ep.Interface == "public" {
					f.MagnumEndpoints = append(f.MagnumEndpoints, Endpoint{Region: cmp.Or(ep.RegionID, ep.Region), URL: ep.URL})
				}
			}
		case "volumev3", "block-storage":
			hasVolume = true
		}
	}
	sort.Slice(f.MagnumEndpoints, func(i, j int) bool { return f.MagnumEndpoints[i].Region < f.MagnumEndpoints[j].Region })

	identity, err := openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{})
	if err != nil {
		return Facts{}, err
	}
	pages, err := regions.List(identity, nil).AllPages(ctx)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: list Keystone regions: %w", err)
	}
	rs, err := regions.ExtractRegions(pages)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: list Keystone regions: %w", err)
	}
	for _, r := range rs {
		f.Regions = append(f.Regions, Region{ID: r.ID, Description: r.Description})
	}

	eo := gophercloud.EndpointOpts{Region: c.Region, Availability: gophercloud.AvailabilityPublic}
	compute, err := openstack.NewComputeV2(provider, eo)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: Nova: %w", err)
	}
	pages, err = flavors.ListDetail(compute, flavors.ListOpts{AccessType: flavors.PublicAccess}).AllPages(ctx)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: list Nova flavors: %w", err)
	}
	fl, err := flavors.ExtractFlavors(pages)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: list Nova flavors: %w", err)
	}
	for _, x := range fl {
		if x.IsPublic {
			f.Flavors = append(f.Flavors, NodeType{Name: x.Name, ID: x.ID, VCPUs: x.VCPUs, RAMMiB: x.RAM, DiskGiB: x.Disk})
		}
	}

	image, err := openstack.NewImageV2(provider, eo)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: Glance: %w", err)
	}
	pages, err = images.List(image, images.ListOpts{Visibility: images.ImageVisibilityPublic, Status: images.ImageStatusActive}).AllPages(ctx)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: list Glance images: %w", err)
	}
	imgs, err := images.ExtractImages(pages)
	if err != nil {
		return Facts{}, fmt.Errorf("discovery: list Glance images: %w", err)
	}
	for _, img := range imgs {
		f.Images = append(f.Images, Image{ID: img.ID, Name: img.Name, OSDistro: stringProperty(img.Properties, "os_distro"),
			KubeVersion: stringProperty(img.Properties, "kube_version")})
	}

	if hasVolume {
		volume, err := openstack.NewBlockStorageV3(provider, eo)
		if err != nil {
			return Facts{}, fmt.Errorf("discovery: Cinder: %w", err)
		}
		pages, err := volumetypes.List(volume, volumetypes.ListOpts{}).AllPages(ctx)
		if err != nil {
			return Facts{}, fmt.Errorf("discovery: list Cinder volume types: %w", err)
		}
		vts, err := volumetypes.ExtractVolumeTypes(pages)
		if err != nil {
			return Facts{}, fmt.Errorf("discovery: list Cinder volume types: %w", err)
		}
		f.VolumeTypes = []string{}
		for _, vt := range vts {
			if vt.IsPublic {
				f.VolumeTypes = append(f.VolumeTypes, vt.Name)
			}
		}
	}
	if c.Templates != nil {
		if f.Templates, err = c.Templates(ctx); err != nil {
			return Facts{}, fmt.Errorf("discovery: list public cluster templates: %w", err)
		}
	}
	return f, nil
}

func stringProperty(p map[string]any, key string) string {
	s, _ := p[key].(string)
	return s
}
