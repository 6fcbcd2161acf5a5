package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// fakeImages is Glance as the request's user sees it: images by reference, or an outage.
type fakeImages struct {
	mu     sync.Mutex
	images map[string]templates.Image
	err    error
	asked  []string // "<project> <ref> <token>"
}

func (f *fakeImages) FindImage(_ context.Context, caller *rpc.Context, projectID, ref string) (templates.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, projectID+" "+ref+" "+caller.AuthToken)
	if f.err != nil {
		return templates.Image{}, f.err
	}
	img, ok := f.images[ref]
	if !ok {
		return templates.Image{}, errors.New("compute: look up image " + ref + ": 404 Not Found")
	}
	return img, nil
}

// withToken gives a request the user's token and its body, as magnum-api sends them.
func withToken(req *rpc.Request) *rpc.Request {
	req.Context.AuthTokenInfo = json.RawMessage(`{"token": {"project": {"id": "` + demoProject + `"}}}`)
	return req
}

// createWithLabels is a create request of templateV136 (image ubuntu-2404-kube-v1.36.3) with labels.
func (h *harness) createWithLabels(labels map[string]string) (*rpc.Request, string) {
	req, id := h.createRequest("demo", 1)
	cl := &magnum.Cluster{}
	require.NoError(h.t, magnum.Decode(mustDecode(h.t, req.Args["cluster"]), cl))
	cl.Labels.Set(magnum.DictFromMap(labels))
	req.Args["cluster"] = encodeArg(h.t, cl)
	return withToken(req), id
}

func mustDecode(t *testing.T, raw json.RawMessage) *magnum.Object {
	obj, err := magnum.DecodeObject(raw)
	require.NoError(t, err)
	return obj
}

// refusedAtOnce checks a create ended CREATE_FAILED in its handler, with nothing made anywhere.
func (h *harness) refusedAtOnce(id string, reason ...string) {
	h.t.Helper()
	cl := h.store.cluster(h.t, id)
	require.Equal(h.t, magnum.StatusCreateFailed, cl.Status.Or(""))
	for _, r := range reason {
		require.Contains(h.t, cl.StatusReason.Or(""), r)
	}
	for _, g := range []string{"default-master", "default-worker"} {
		require.Equal(h.t, magnum.StatusCreateFailed, h.store.group(h.t, id, g).Status.Or(""), g)
	}
	require.Zero(h.t, h.settle(5))
	require.Empty(h.t, h.kube.clusters(), "no CAPI Cluster")
	h.kube.mu.Lock()
	require.Zero(h.t, h.kube.applies, "nothing applied in the management cluster")
	require.Empty(h.t, h.kube.namespaces, "not even the project's namespace")
	require.Empty(h.t, h.kube.secrets)
	h.kube.mu.Unlock()
	require.Zero(h.t, h.keys.count(), "no CA made")
	require.Equal(h.t, magnum.StatusCreateFailed, h.store.cluster(h.t, id).Status.Or(""))
}

func TestCreateRefusesAKubernetesVersionTheImageCannotRun(t *testing.T) {
	rangeText := addons.SupportedKubernetesVersions().String()
	require.Equal(t, "v1.31 to v1.36 (any patch release)", rangeText)
	for _, tc := range []struct {
		name   string
		glance *fakeImages
	}{
		{"Glance answers", &fakeImages{images: map[string]templates.Image{
			"ubuntu-2404-kube-v1.36.3": {Name: "ubuntu-2404-kube-v1.36.3", KubeVersion: "v1.36.3"}}}},
		{"Glance is down: the image name decides", &fakeImages{err: errors.New("compute: find Glance: connection refused")}},
		{"no Glance lookup configured", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, tag := range []string{"v1.99.0", "v1.35.4"} {
				h := newHarness(t)
				if tc.glance != nil {
					h.c.opts.Images = tc.glance
				}
				req, id := h.createWithLabels(map[string]string{"kube_tag": tag})
				_, err := h.deliver(req, 1)
				require.NoError(t, err, "a refused create is recorded, not an RPC error")
				h.refusedAtOnce(id, "kube_tag", tag, "ubuntu-2404-kube-v1.36.3 runs v1.36.3", rangeText)
			}
			// The image's own version is built, Glance or not.
			h := newHarness(t)
			if tc.glance != nil {
				h.c.opts.Images = tc.glance
			}
			req, id := h.createWithLabels(map[string]string{"kube_tag": "v1.36.3"})
			_, err := h.deliver(req, 1)
			require.NoError(t, err)
			require.Zero(t, h.settle(10))
			require.Equal(t, magnum.StatusCreateInProgress, h.store.cluster(t, id).Status.Or(""))
			h.consistent(id, 1)
		})
	}
}

func TestCreateReadsTheImagesPropertyAsTheCaller(t *testing.T) {
	const imageID = "2404a135-0004-4000-8000-000000000135"
	glance := &fakeImages{images: map[string]templates.Image{imageID: {Name: "ubuntu-2404-kube-v1.35.4", KubeVersion: "v1.35.4"}}}
	h := newHarness(t)
	h.c.opts.Images = glance
	h.store.templates[templateV136].ImageID.Set(imageID) // by ID: the name says nothing

	// No kube_tag: the default (v1.36.3) is not what the image runs.
	req, id := h.createWithLabels(map[string]string{})
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	h.refusedAtOnce(id, "image ubuntu-2404-kube-v1.35.4 runs v1.35.4 (its Glance property kube_version)", "kube_tag=v1.35.4")
	require.Equal(t, []string{demoProject + " " + imageID + " token"}, glance.asked, "as the request's user, in the cluster's project")

	// With the image's version as kube_tag, it is built.
	h = newHarness(t)
	h.c.opts.Images = glance
	h.store.templates[templateV136].ImageID.Set(imageID)
	req, id = h.createWithLabels(map[string]string{"kube_tag": "v1.35.4"})
	_, err = h.deliver(req, 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(10))
	v, _, _ := unstructuredString(h.kube.clusters()[0].Object, "spec", "topology", "version")
	require.Equal(t, "v1.35.4", v)
	require.Equal(t, magnum.StatusCreateInProgress, h.store.cluster(t, id).Status.Or(""))

	// Without the user's token body nobody asks Glance (the name decides).
	h = newHarness(t)
	asked := &fakeImages{}
	h.c.opts.Images = asked
	req, _ = h.createRequest("demo", 1)
	_, err = h.deliver(req, 1)
	require.NoError(t, err)
	require.Empty(t, asked.asked)
}

func TestOperatorMayAllowAKubeTagOtherThanTheImages(t *testing.T) {
	h := newHarness(t)
	h.c.opts.AllowKubeTagImageMismatch = true
	req, id := h.createWithLabels(map[string]string{"kube_tag": "v1.35.4"})
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(10))
	require.Equal(t, magnum.StatusCreateInProgress, h.store.cluster(t, id).Status.Or(""))

	// Not outside the supported range, though.
	h = newHarness(t)
	h.c.opts.AllowKubeTagImageMismatch = true
	req, id = h.createWithLabels(map[string]string{"kube_tag": "v1.99.0"})
	_, err = h.deliver(req, 1)
	require.NoError(t, err)
	h.refusedAtOnce(id, "kube_tag is outside the Kubernetes versions this cloud supports", "v1.31 to v1.36")
}

// Every label's value is checked by its type before anything is written, implemented or not.
func TestCreateRefusesAnInvalidValueOfAnUnimplementedLabel(t *testing.T) {
	h := newHarness(t) // the in-memory flavor, which has no API load balancer
	req, id := h.createWithLabels(map[string]string{"master_lb_floating_ip_enabled": "maybe"})
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	h.refusedAtOnce(id, `invalid value "maybe" for label master_lb_floating_ip_enabled: want true or false`)

	h = newHarness(t)
	req, id = h.createWithLabels(map[string]string{"master_lb_floating_ip_enabled": "false"})
	_, err = h.deliver(req, 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(10))
	require.Equal(t, magnum.StatusCreateInProgress, h.store.cluster(t, id).Status.Or(""), "a valid value is only reported")
}

// An upgrade to a template whose image cannot run its kube_tag is refused before any change: the
// cluster stays *_COMPLETE on its template and version.
func TestUpgradeToATemplateWhoseImageCannotRunItsKubeTagIsRefused(t *testing.T) {
	for _, tc := range []struct{ image, tag, reason string }{
		{"ubuntu-2404-kube-v1.35.4", "v1.36.3", "kube_tag does not match the Kubernetes version of the image: kube_tag v1.36.3, image ubuntu-2404-kube-v1.35.4 runs v1.35.4"},
		{"ubuntu-2404-kube-v1.37.1", "", "the image's Kubernetes version is outside the versions this cloud supports: image ubuntu-2404-kube-v1.37.1 runs v1.37.1"},
	} {
		t.Run(tc.image, func(t *testing.T) {
			h := newHarness(t)
			id := h.created(1)
			h.store.mu.Lock()
			h.store.clusters[id].CoeVersion.Set("v1.36.3")
			h.store.mu.Unlock()
			const target = "7b0a3f6e-1111-4c4c-8a8a-0000000000ff"
			tmpl := &magnum.ClusterTemplate{}
			tmpl.UUID.Set(target)
			tmpl.Name.Set("mismatched")
			tmpl.COE.Set("kubernetes")
			tmpl.ImageID.Set(tc.image)
			tmpl.FlavorID.Set("m1.small")
			tmpl.MasterFlavorID.Set("m1.medium")
			labels := magnum.NewDict()
			if tc.tag != "" {
				labels = magnum.NewDict("kube_tag", tc.tag)
			}
			tmpl.Labels.Set(labels)
			h.store.templates[target] = tmpl
			h.kube.mu.Lock()
			applied := h.kube.applies
			h.kube.mu.Unlock()

			req := withToken(request("cluster_upgrade", map[string]json.RawMessage{"cluster": h.clusterArg(id),
				"cluster_template": encodeArg(t, tmpl), "max_batch_size": jsonArg(t, 1)}))
			req.IsCall = true
			_, err := h.deliver(req, 1)
			var me *magnum.Exception
			require.True(t, errors.As(err, &me), "%v", err)
			require.Equal(t, "InvalidClusterTemplateForUpgrade", me.Class)
			require.Contains(t, me.Message, tc.reason)
			require.Contains(t, me.Message, "v1.31 to v1.36")

			cl := h.store.cluster(t, id)
			require.Equal(t, "CREATE_COMPLETE", string(cl.Status.Or("")), "left as it was")
			require.Equal(t, templateV136, cl.ClusterTemplateID.Or(""))
			for _, g := range []string{"default-master", "default-worker"} {
				require.Equal(t, "CREATE_COMPLETE", string(h.store.group(t, id, g).Status.Or("")), g)
			}
			require.Zero(t, h.settle(5))
			h.kube.mu.Lock()
			require.Equal(t, applied, h.kube.applies, "nothing applied")
			h.kube.mu.Unlock()
			v, _, _ := unstructuredString(h.kube.clusters()[0].Object, "spec", "topology", "version")
			require.Equal(t, "v1.36.3", v)
		})
	}
}
