package templates

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// supported is the bridge's range today (Cluster API v1.14 narrowed to the add-on table's v1.30–v1.36);
// internal/addons owns the table, so it is spelled out here.
var supported = SupportedKubernetesVersions(MinorRange("v1.30", "v1.36"))

func TestVersionRange(t *testing.T) {
	require.Equal(t, "v1.31", supported.Oldest())
	require.Equal(t, "v1.36", supported.Newest())
	require.Equal(t, "v1.31 to v1.36 (any patch release)", supported.String())
	for v, in := range map[string]bool{
		"v1.31.0": true, "v1.36.3": true, "1.36.99": true, "v1.33.1": true,
		"v1.30.14": false, "v1.37.0": false, "v1.99.0": false, "v2.31.0": false, "latest": false,
	} {
		require.Equal(t, in, supported.Contains(v), v)
	}
	require.True(t, MinorRange("v1.31", "v1.32").Intersect(MinorRange("v1.34", "v1.36")).Empty())
	require.False(t, VersionRange{}.Contains("v1.36.3"), "the zero range holds nothing")
	require.True(t, VersionRange{}.IsZero())
	require.Equal(t, supported, VersionRange{}.Intersect(supported))
	require.Equal(t, CAPIKubernetesVersions, SupportedKubernetesVersions())
}

// The Cluster API range is read from its book for the release go.mod names: a bump of Cluster API
// must revisit it.
func TestCAPIRangeFollowsGoMod(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/cluster-api (v\d+\.\d+)\.\d+`).FindSubmatch(mod)
	require.NotNil(t, m)
	require.Equal(t, "v1.14", string(m[1]), "Cluster API changed: update CAPIKubernetesVersions from its docs/book/src/reference/versions.md")
	require.Equal(t, "v1.31 to v1.37 (any patch release)", CAPIKubernetesVersions.String())
}

func TestCheckKubernetesVersion(t *testing.T) {
	const def = "v1.36.3"
	byName := func(name string) Image { return Image{Ref: name} }
	looked := func(ref, name, property string) Image { return Image{Ref: ref, Name: name, KubeVersion: property} }
	const id = "2404a136-0003-4000-8000-000000000136"
	v1363 := looked("ubuntu-2404-kube-v1.36.3", "ubuntu-2404-kube-v1.36.3", "v1.36.3")
	cases := []struct {
		name   string
		labels map[string]string
		image  Image
		def    string
		allow  bool
		want   string // the version built; "" when refused
		label  string // VersionError.Label when refused
		reason []string
	}{
		{name: "kube_tag matches the property", labels: map[string]string{"kube_tag": "v1.36.3"}, image: v1363, want: "v1.36.3"},
		{name: "kube_tag without v matches", labels: map[string]string{"kube_tag": "1.36.3"}, image: v1363, want: "v1.36.3"},
		{name: "no kube_tag: the image's", image: v1363, want: "v1.36.3"},
		{name: "newer kube_tag than the image", labels: map[string]string{"kube_tag": "v1.99.0"}, image: v1363, label: "kube_tag",
			reason: []string{"kube_tag does not match", "kube_tag v1.99.0", "image ubuntu-2404-kube-v1.36.3 runs v1.36.3", "Glance property kube_version", "v1.31 to v1.36"}},
		{name: "older kube_tag than the image", labels: map[string]string{"kube_tag": "v1.35.4"}, image: v1363, label: "kube_tag",
			reason: []string{"kube_tag does not match", "kube_tag v1.35.4", "v1.36.3", "v1.31 to v1.36"}},
		{name: "older kube_tag, the image known by name only", labels: map[string]string{"kube_tag": "v1.35.4"}, image: byName("ubuntu-2404-kube-v1.36.3"),
			label: "kube_tag", reason: []string{"kube_tag does not match", "(the version in its name)"}},
		{name: "allowed mismatch", labels: map[string]string{"kube_tag": "v1.35.4"}, image: v1363, allow: true, want: "v1.35.4"},
		{name: "allowed mismatch, still outside the range", labels: map[string]string{"kube_tag": "v1.99.0"}, image: v1363, allow: true,
			label: "kube_tag", reason: []string{"kube_tag is outside the Kubernetes versions this cloud supports", "kube_tag v1.99.0", "ubuntu-2404-kube-v1.36.3", "v1.31 to v1.36"}},
		{name: "kube_tag outside the range on an image without a version", labels: map[string]string{"kube_tag": "v1.30.2"}, image: byName("plain-ubuntu"),
			label: "kube_tag", reason: []string{"kube_tag is outside", "kube_tag v1.30.2 (image plain-ubuntu)", "v1.31 to v1.36"}},
		{name: "kube_tag on an image without a version", labels: map[string]string{"kube_tag": "v1.34.1"}, image: byName("plain-ubuntu"), want: "v1.34.1"},
		{name: "an image outside the range", image: looked("ubuntu-2204-kube-v1.29.6", "ubuntu-2204-kube-v1.29.6", "v1.29.6"),
			reason: []string{"the image's Kubernetes version is outside", "image ubuntu-2204-kube-v1.29.6 runs v1.29.6", "v1.31 to v1.36"}},
		{name: "an image outside the range, matching kube_tag", labels: map[string]string{"kube_tag": "v1.29.6"}, image: byName("ubuntu-2204-kube-v1.29.6"),
			label: "kube_tag", reason: []string{"kube_tag is outside", "v1.31 to v1.36"}},
		{name: "the property wins over the name", labels: map[string]string{"kube_tag": "v1.36.3"}, image: looked("old-name-kube-v1.35.4", "old-name-kube-v1.35.4", "v1.36.3"), want: "v1.36.3"},
		{name: "kube_tag following a name the property contradicts", labels: map[string]string{"kube_tag": "v1.35.4"},
			image: looked("old-name-kube-v1.35.4", "old-name-kube-v1.35.4", "v1.36.3"), label: "kube_tag", reason: []string{"runs v1.36.3 (its Glance property kube_version)"}},
		{name: "no kube_tag, a name the property contradicts", image: looked("old-name-kube-v1.35.4", "old-name-kube-v1.35.4", "v1.36.3"),
			reason: []string{"is not the one this cluster would get", "the cluster gets v1.35.4 (the version in the template's image name)", "kube_tag=v1.36.3"}},
		{name: "a malformed property is no version: the name decides", image: looked("ubuntu-2404-kube-v1.36.3", "ubuntu-2404-kube-v1.36.3", "1.36"), want: "v1.36.3"},
		{name: "image by ID, Glance name of the default's version", image: looked(id, "ubuntu-2404-kube-v1.36.3", ""), want: "v1.36.3"},
		{name: "image by ID of another version than the default", image: looked(id, "ubuntu-2404-kube-v1.35.4", "v1.35.4"),
			reason: []string{"is not the one this cluster would get", "image ubuntu-2404-kube-v1.35.4 runs v1.35.4", "the cluster gets v1.36.3 (the default)", "kube_tag=v1.35.4"}},
		{name: "image by ID of another version, with its kube_tag", labels: map[string]string{"kube_tag": "v1.35.4"}, image: looked(id, "ubuntu-2404-kube-v1.35.4", "v1.35.4"), want: "v1.35.4"},
		{name: "image by ID, Glance not asked: the default", image: Image{Ref: id}, want: "v1.36.3"},
		{name: "a default outside the range", image: byName("plain-ubuntu"), def: "v1.30.0",
			reason: []string{"the default Kubernetes version is outside", "v1.30.0", "set the label kube_tag", "v1.31 to v1.36"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.def
			if d == "" {
				d = def
			}
			v, err := CheckKubernetesVersion(tc.labels, tc.image, d, VersionPolicy{Supported: supported, AllowImageMismatch: tc.allow})
			if tc.want != "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, v)
				return
			}
			var ve *VersionError
			require.True(t, errors.As(err, &ve), "%v", err)
			require.Equal(t, tc.label, ve.Label)
			for _, r := range tc.reason {
				require.Contains(t, ve.Error(), r)
			}
		})
	}

	_, err := CheckKubernetesVersion(map[string]string{"kube_tag": "latest"}, v1363, def, VersionPolicy{Supported: supported})
	var le *LabelError
	require.True(t, errors.As(err, &le))
	require.Equal(t, "kube_tag", le.Label)

	v, err := CheckKubernetesVersion(map[string]string{"kube_tag": "v1.37.1"}, byName("plain-ubuntu"), def, VersionPolicy{})
	require.NoError(t, err, "an unset range is Cluster API's alone")
	require.Equal(t, "v1.37.1", v)
}

// A refused upgrade shows only the message up to its first full stop: the key words come first.
func TestVersionRefusalsSayWhatBeforeTheFirstFullStop(t *testing.T) {
	for _, labels := range []map[string]string{{"kube_tag": "v1.99.0"}, {"kube_tag": "v1.35.4"}} {
		_, err := CheckKubernetesVersion(labels, Image{Ref: "ubuntu-2404-kube-v1.36.3"}, "v1.36.3", VersionPolicy{Supported: supported})
		require.Error(t, err)
		title, _, _ := strings.Cut(err.Error(), ".")
		require.Contains(t, title, "kube_tag does not match the Kubernetes version of the image")
	}
}

func TestPreflight(t *testing.T) {
	in := baseInput()
	in.Flavor = FlavorInMemory
	in.Template.ImageID = "ubuntu-2404-kube-v1.36.3"
	policy := VersionPolicy{Supported: supported}

	// A value that is not a boolean is refused by name, though the in-memory flavor ignores the label.
	in.Cluster.Labels = map[string]string{"master_lb_floating_ip_enabled": "maybe"}
	_, err := Preflight(in, Image{}, policy)
	var le *LabelError
	require.True(t, errors.As(err, &le), "%v", err)
	require.Equal(t, "master_lb_floating_ip_enabled", le.Label)
	require.Contains(t, err.Error(), "label master_lb_floating_ip_enabled: want true or false")
	// A valid one passes and is reported as not implemented.
	in.Cluster.Labels = map[string]string{"master_lb_floating_ip_enabled": "false"}
	v, err := Preflight(in, Image{}, policy)
	require.NoError(t, err)
	require.Equal(t, "v1.36.3", v)
	unimpl, err := ValidateLabels(FlavorInMemory, in.Cluster.Labels)
	require.NoError(t, err)
	require.Equal(t, []string{"master_lb_floating_ip_enabled"}, unimpl)
	// So is an invalid integer or CIDR of an unimplemented label.
	for label, value := range map[string]string{"boot_volume_size": "big", "fixed_subnet_cidr": "10.0.0.1/24", "flannel_network_subnetlen": "-1"} {
		in.Cluster.Labels = map[string]string{label: value}
		_, err := Preflight(in, Image{}, policy)
		require.True(t, errors.As(err, &le), "%s=%s: %v", label, value, err)
		require.Equal(t, label, le.Label)
	}

	// The flavor the labels choose must be offered.
	in.Cluster.Labels = map[string]string{LabelInfrastructure: "openstack"}
	in.AllowedFlavors = []Flavor{FlavorInMemory}
	_, err = Preflight(in, Image{}, policy)
	require.ErrorContains(t, err, "label capi_infrastructure: this cloud does not offer it")
	in.AllowedFlavors = nil

	// The version, on the template's image (img.Ref defaults to it).
	in.Cluster.Labels = map[string]string{"kube_tag": "v1.99.0"}
	_, err = Preflight(in, Image{}, policy)
	var ve *VersionError
	require.True(t, errors.As(err, &ve), "%v", err)
	require.Contains(t, err.Error(), "image ubuntu-2404-kube-v1.36.3 runs v1.36.3")
	_, err = Preflight(in, Image{Name: "ubuntu-2404-kube-v1.36.3", KubeVersion: "v1.36.3"}, policy)
	require.ErrorContains(t, err, "Glance property kube_version")
}
