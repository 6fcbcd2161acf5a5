package templates

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// ParseVersion reads a Kubernetes version as a label gives it: vX.Y.Z, the "v" optional, nothing
// around it (no pre-release: CAPI's images are built for releases).
func ParseVersion(v string) (*version.Version, error) {
	if !versionRE.MatchString(v) {
		return nil, fmt.Errorf("not a Kubernetes version: %q", v)
	}
	return version.ParseGeneric(v)
}

// VersionRange is a span of Kubernetes minor versions, both ends included, any patch of them. The
// zero value is unset (IsZero).
type VersionRange struct {
	oldest, newest *version.Version
}

// MinorRange is the range of minors from oldest to newest ("v1.31", "v1.36"; a patch is ignored).
// It panics on a malformed version: ranges are constants of the bridge.
func MinorRange(oldest, newest string) VersionRange {
	o, n := version.MustParseGeneric(oldest), version.MustParseGeneric(newest)
	return VersionRange{oldest: version.MajorMinor(o.Major(), o.Minor()), newest: version.MajorMinor(n.Major(), n.Minor())}
}

// IsZero reports whether the range is unset.
func (r VersionRange) IsZero() bool { return r.oldest == nil || r.newest == nil }

// Empty reports whether no version lies in the range.
func (r VersionRange) Empty() bool { return r.IsZero() || r.oldest.GreaterThan(r.newest) }

// Contains reports whether the version (vX.Y.Z) lies in the range; a malformed version does not.
func (r VersionRange) Contains(v string) bool {
	if r.Empty() {
		return false
	}
	parsed, err := version.ParseGeneric(v)
	if err != nil {
		return false
	}
	minor := version.MajorMinor(parsed.Major(), parsed.Minor())
	return minor.AtLeast(r.oldest) && !minor.GreaterThan(r.newest)
}

// Intersect is the part of both ranges (Empty when they do not overlap).
func (r VersionRange) Intersect(o VersionRange) VersionRange {
	if r.IsZero() {
		return o
	}
	if o.IsZero() {
		return r
	}
	out := r
	if o.oldest.GreaterThan(out.oldest) {
		out.oldest = o.oldest
	}
	if o.newest.LessThan(out.newest) {
		out.newest = o.newest
	}
	return out
}

// Oldest and Newest are the range's ends as "v1.31".
func (r VersionRange) Oldest() string { return minorString(r.oldest) }
func (r VersionRange) Newest() string { return minorString(r.newest) }

func minorString(v *version.Version) string {
	if v == nil {
		return ""
	}
	return fmt.Sprintf("v%d.%d", v.Major(), v.Minor())
}

// String is how the range is named to tenants: "v1.31 to v1.36 (any patch release)".
func (r VersionRange) String() string {
	switch {
	case r.IsZero():
		return "any version"
	case r.Empty():
		return "none"
	}
	return r.Oldest() + " to " + r.Newest() + " (any patch release)"
}

// CAPIKubernetesVersions are the workload-cluster Kubernetes minors Cluster API v1.14 (go.mod:
// sigs.k8s.io/cluster-api v1.14.2) supports, from its book's version matrix
// (docs/book/src/reference/versions.md, "Core provider", the same for KubeadmControlPlane): v1.31
// to v1.37, v1.37 from v1.14.1 on. Bump it with Cluster API (TestCAPIRangeFollowsGoMod checks go.mod).
var CAPIKubernetesVersions = MinorRange("v1.31", "v1.37")

// SupportedKubernetesVersions is the range a cluster's version must lie in: Cluster API's
// (CAPIKubernetesVersions), narrowed by each of the given ranges (the add-on table's:
// addons.KubernetesVersions; internal/addons depends on this package, not the other way round).
func SupportedKubernetesVersions(narrowedBy ...VersionRange) VersionRange {
	r := CAPIKubernetesVersions
	for _, n := range narrowedBy {
		r = r.Intersect(n)
	}
	return r
}

// VersionPolicy is what the bridge accepts as a cluster's Kubernetes version.
type VersionPolicy struct {
	// Supported is the range the version must lie in; zero: Cluster API's alone.
	Supported VersionRange
	// AllowImageMismatch lets kube_tag differ from the image's own version ([bridge]
	// allow_kube_tag_image_mismatch): for operators whose images install Kubernetes at boot.
	AllowImageMismatch bool
}

// Image is what the version check knows of a cluster template's image.
type Image struct {
	// Ref is the template's image_id as Magnum stores it: a Glance name or ID.
	Ref string
	// Name is Glance's name of the image; empty when it was not looked up.
	Name string
	// KubeVersion is the image's Glance property kube_version (which magnum-capi-helm also
	// requires); empty when the image has none or was not looked up.
	KubeVersion string
}

// Where an image's own Kubernetes version comes from, as status reasons name it.
const (
	sourceProperty = "its Glance property kube_version"
	sourceName     = "the version in its name"
)

// OwnVersion is the Kubernetes version the image was built for — its kube_version property, else
// the …-kube-vX.Y.Z in its name (Glance's name, else the template's reference) — and where that
// comes from; "" when the image does not say. A malformed property is not a version: the name
// decides then.
func (i Image) OwnVersion() (v, source string) {
	if p := strings.TrimSpace(i.KubeVersion); versionRE.MatchString(p) {
		return withV(p), sourceProperty
	}
	for _, name := range []string{i.Name, i.Ref} {
		if m := imageVersionRE.FindStringSubmatch(name); m != nil {
			return withV(m[1]), sourceName
		}
	}
	return "", ""
}

// display names the image for a tenant: Glance's name when known, else the template's reference.
func (i Image) display() string {
	if i.Name != "" {
		return i.Name
	}
	return i.Ref
}

func withV(v string) string {
	if strings.HasPrefix(v, "v") {
		return v
	}
	return "v" + v
}

// VersionError is a Kubernetes version the bridge refuses to build. Its message names the label
// (kube_tag) or the setting that gave the version, the image and the supported range, key words
// first: magnum-api shows a refused upgrade's message only up to its first full stop, and every
// version number has one.
type VersionError struct {
	// Label is "kube_tag" when the tenant's label gave the version, else "".
	Label   string
	Version string
	Message string
}

func (e *VersionError) Error() string { return e.Message }

// CheckKubernetesVersion decides whether the bridge builds a cluster of these labels on this
// image, and returns the version it builds (what Render builds: kube_tag, else the version in
// the template's image reference, else def). That version must equal the image's own version
// (Image.OwnVersion: a kubeadm of one version refuses another version's control plane) unless the
// policy allows a mismatch or the image does not say, and lie in the policy's supported range.
// Errors are *LabelError (kube_tag is not a version) or *VersionError.
func CheckKubernetesVersion(labels map[string]string, img Image, def string, p VersionPolicy) (string, error) {
	v, err := KubernetesVersion(labels, img.Ref, def)
	if err != nil {
		return "", err
	}
	supported := p.Supported
	if supported.IsZero() {
		supported = SupportedKubernetesVersions()
	}
	own, source := img.OwnVersion()
	tag := strings.TrimSpace(labels[LabelKubeTag]) != ""
	fromName := !tag && img.Ref != "" && imageVersionRE.MatchString(img.Ref)
	tail := "; this cloud supports Kubernetes " + supported.String()
	switch {
	case own != "" && !sameVersion(own, v) && tag && !p.AllowImageMismatch:
		other := ""
		if supported.Contains(v) {
			other = ", or choose an image built for " + v
		}
		return "", &VersionError{Label: LabelKubeTag, Version: v, Message: fmt.Sprintf(
			"kube_tag does not match the Kubernetes version of the image: kube_tag %s, image %s runs %s (%s); set kube_tag to %s or leave it unset%s%s",
			v, img.display(), own, source, own, other, tail)}
	case own != "" && !sameVersion(own, v) && !tag:
		// No kube_tag, and the image runs another version than the cluster would get: the
		// template names the image by ID (the default applies) or by a name whose version its
		// kube_version property contradicts. Refused whatever the operator allows: nobody asked
		// for that version on this image.
		gets := "the default"
		if fromName {
			gets = "the version in the template's image name"
		}
		return "", &VersionError{Version: v, Message: fmt.Sprintf(
			"the image's Kubernetes version is not the one this cluster would get: image %s runs %s (%s), without kube_tag the cluster gets %s (%s); set the label kube_tag=%s%s",
			img.display(), own, source, v, gets, own, tail)}
	case !supported.Contains(v) && tag:
		return "", &VersionError{Label: LabelKubeTag, Version: v, Message: fmt.Sprintf(
			"kube_tag is outside the Kubernetes versions this cloud supports: kube_tag %s (image %s)%s", v, img.display(), tail)}
	case !supported.Contains(v) && own != "":
		return "", &VersionError{Version: v, Message: fmt.Sprintf(
			"the image's Kubernetes version is outside the versions this cloud supports: image %s runs %s (%s)%s", img.display(), own, source, tail)}
	case !supported.Contains(v):
		return "", &VersionError{Version: v, Message: fmt.Sprintf(
			"the default Kubernetes version is outside the versions this cloud supports: %s (image %s does not name its version); set the label kube_tag%s",
			v, img.display(), tail)}
	}
	return v, nil
}

func sameVersion(a, b string) bool {
	x, err1 := version.ParseGeneric(a)
	y, err2 := version.ParseGeneric(b)
	return err1 == nil && err2 == nil && x.EqualTo(y)
}

// PreflightLabels is Preflight without the image: the flavor the labels choose is offered, and every
// label's value is valid.
func PreflightLabels(in Input) error {
	in.Flavor = SelectedFlavor(in.Cluster.Labels, in.Flavor)
	if err := checkFlavor(in); err != nil {
		return err
	}
	_, err := ValidateLabels(in.Flavor, in.Cluster.Labels)
	return err
}

// Preflight is what a create checks before anything is written or built: the infrastructure
// flavor the labels choose, every label's value by its type (ValidateLabels), and the Kubernetes
// version (CheckKubernetesVersion) on the image img (img.Ref defaults to the template's image).
// It returns the version the cluster is built with.
func Preflight(in Input, img Image, p VersionPolicy) (string, error) {
	if err := PreflightLabels(in); err != nil {
		return "", err
	}
	if img.Ref == "" {
		img.Ref = in.Template.ImageID
	}
	return CheckKubernetesVersion(in.Cluster.Labels, img, in.DefaultKubernetesVersion, p)
}
