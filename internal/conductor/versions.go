package conductor

import (
	"context"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Images finds a cluster template's image in Glance for the Kubernetes version check of a create
// or an upgrade (implemented in internal/app over internal/compute, which also holds the Nova
// client of ServerGroups).
type Images interface {
	// FindImage looks the image up by ID, else by name, as the request's user (its token and the
	// token's catalog), so that the project's private images are found too. The result's Ref is
	// left to the caller.
	FindImage(ctx context.Context, caller *rpc.Context, projectID, image string) (templates.Image, error)
}

// imageLookupTimeout bounds the Glance lookup a create or an upgrade waits for.
const imageLookupTimeout = 10 * time.Second

// versionPolicy is the operator's rule for clusters' Kubernetes versions.
func (c *Conductor) versionPolicy() templates.VersionPolicy {
	return templates.VersionPolicy{Supported: c.opts.KubernetesVersions, AllowImageMismatch: c.opts.AllowKubeTagImageMismatch}
}

// lookupImage is what the version check knows of a template's image: Glance's name and
// kube_version property when Glance answers the request's user, else only the reference.
//
// Glance failing never fails the operation by itself. The lookup only sharpens the check with the
// image's own property; without it the version in the image's name still decides (what the bridge
// renders from anyway), and magnum-api checked that the image exists when the template was made. A
// Glance outage would otherwise refuse every create of the cloud, and a create held for Glance
// would hold magnum-api's clients with it.
func (c *Conductor) lookupImage(ctx context.Context, caller *rpc.Context, projectID, ref string) templates.Image {
	img := templates.Image{Ref: ref}
	if c.opts.Images == nil || ref == "" || caller == nil || caller.AuthToken == "" || len(caller.AuthTokenInfo) == 0 {
		return img
	}
	ctx, cancel := context.WithTimeout(ctx, imageLookupTimeout)
	defer cancel()
	found, err := c.opts.Images.FindImage(ctx, caller, projectID, ref)
	if err != nil {
		c.log.WarnContext(ctx, "the image could not be looked up in Glance; its name decides its Kubernetes version", "image", ref, "error", err)
		return img
	}
	found.Ref = ref
	return found
}
