package compute

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
)

// Image is what the bridge reads of a Glance image: the Kubernetes version check of a create or
// an upgrade compares kube_tag with the version the image was built for.
type Image struct {
	ID, Name string
	// KubeVersion is the image's kube_version property (magnum-capi-helm's convention); empty
	// when it has none.
	KubeVersion string
}

// FindImage looks an image up in Glance (found in the same catalog as Nova) as the client's
// identity, as magnum-api resolves a template's image_id: by ID when ref is a UUID that names an
// image, else by name. A name that matches several images is an error, as it is for magnum-api.
// A missing image is an *Error matching ErrNotFound.
func (c *Client) FindImage(ctx context.Context, ref string) (*Image, error) {
	glance, err := openstack.NewImageV2(c.provider, c.endpoint)
	if err != nil {
		return nil, newError("find Glance", "", err, c.scrub...)
	}
	op := "look up image " + ref
	if _, perr := uuid.Parse(ref); perr == nil {
		img, err := images.Get(ctx, glance, ref).Extract()
		if err == nil {
			return imageOf(img), nil
		}
		if e := newError(op, "", err, c.scrub...); !errors.Is(e, ErrNotFound) {
			return nil, e
		}
		// Not an ID after all: Glance names may look like one.
	}
	pages, err := images.List(glance, images.ListOpts{Name: ref}).AllPages(ctx)
	if err != nil {
		return nil, newError(op, "", err, c.scrub...)
	}
	found, err := images.ExtractImages(pages)
	if err != nil {
		return nil, newError(op, "", err, c.scrub...)
	}
	switch len(found) {
	case 0:
		return nil, &Error{Op: op, StatusCode: http.StatusNotFound, Message: "no image of that ID or name"}
	case 1:
		return imageOf(&found[0]), nil
	}
	return nil, &Error{Op: op, Message: fmt.Sprintf("%d images have that name", len(found))}
}

func imageOf(img *images.Image) *Image {
	kube, _ := img.Properties["kube_version"].(string)
	return &Image{ID: img.ID, Name: img.Name, KubeVersion: kube}
}
