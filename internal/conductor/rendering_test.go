package conductor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

const olderClass = "magnum-0123456789ab"

// renderedByAnOlderBridge rewrites the live Cluster as a bridge that renders differently would have
// made it: another class, another version, a variable this bridge does not render.
func (h *harness) renderedByAnOlderBridge() {
	h.kube.mu.Lock()
	defer h.kube.mu.Unlock()
	for _, o := range h.kube.objects {
		if o.GetKind() != "Cluster" {
			continue
		}
		require.NoError(h.t, unstructured.SetNestedField(o.Object, olderClass, "spec", "topology", "classRef", "name"))
		require.NoError(h.t, unstructured.SetNestedField(o.Object, "v1.36.2", "spec", "topology", "version"))
		require.NoError(h.t, unstructured.SetNestedSlice(o.Object, []any{map[string]any{"name": "older", "value": "x"}},
			"spec", "topology", "variables"))
		a := o.GetAnnotations()
		a[templates.AnnotationRenderedBy] = "v0.0.9"
		o.SetAnnotations(a)
	}
}

func (h *harness) classesApplied() int {
	h.kube.mu.Lock()
	defer h.kube.mu.Unlock()
	n := 0
	for _, o := range h.kube.objects {
		if o.GetKind() == "ClusterClass" {
			n++
		}
	}
	return n
}

func (h *harness) liveTopology() (class, version string, variables []any) {
	cls := h.kube.clusters()
	require.Len(h.t, cls, 1)
	class, _, _ = unstructured.NestedString(cls[0].Object, "spec", "topology", "classRef", "name")
	version, _, _ = unstructured.NestedString(cls[0].Object, "spec", "topology", "version")
	variables, _, _ = unstructured.NestedSlice(cls[0].Object, "spec", "topology", "variables")
	return class, version, variables
}

// A cluster built by a bridge that renders differently keeps its rendering through every operation
// that asks for no new machines; the upgrade gives it this bridge's.
func TestDayTwoKeepsTheClustersRendering(t *testing.T) {
	h := newHarness(t)
	h.c.opts.BridgeVersion = "v0.2.0"
	id := h.created(2)
	key := h.kubeClusterKey()
	h.kube.mu.Lock()
	h.kube.objects = map[string]*unstructured.Unstructured{key: h.kube.objects[key]} // count this bridge's classes from here
	h.kube.mu.Unlock()
	h.renderedByAnOlderBridge()

	kept := func(what string) {
		t.Helper()
		class, version, variables := h.liveTopology()
		require.Equal(t, olderClass, class, what)
		require.Equal(t, "v1.36.2", version, what)
		require.Equal(t, []any{map[string]any{"name": "older", "value": "x"}}, variables, what)
		require.Zero(t, h.classesApplied(), what+": no class of this bridge applied")
		require.Equal(t, "v0.0.9", h.kube.clusters()[0].GetAnnotations()[templates.AnnotationRenderedBy], what)
	}
	run := func(req *rpc.Request) {
		t.Helper()
		_, err := h.deliver(req, 1)
		require.NoError(t, err)
		require.Zero(t, h.settle(10))
		h.complete(id)
	}

	run(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}))
	kept("resize 2 → 3")
	require.EqualValues(t, 3, h.kube.workerReplicas(t, "default-worker"))

	ng := workerGroup(id, "9a9a9a9a-0000-4000-8000-000000000001", "batch", 1)
	ng.FlavorID.Set("m1.small")
	run(request("nodegroup_create", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(t, ng)}))
	kept("node group create")
	require.EqualValues(t, 1, h.kube.workerReplicas(t, "batch"))

	// A restart: the driver resumes an update it did not record, with no upgrade in hand.
	h.store.mu.Lock()
	h.store.clusters[id].Status.Set(magnum.StatusUpdateInProgress)
	h.store.mu.Unlock()
	h.c.resume(id)
	require.Zero(t, h.settle(10))
	h.complete(id)
	kept("a resumed update")

	h.c.opts.KubernetesVersions = templates.CAPIKubernetesVersions
	h.store.mu.Lock()
	h.store.clusters[id].CoeVersion.Set("v1.36.2")
	h.store.mu.Unlock()
	run(request("cluster_upgrade", map[string]json.RawMessage{"cluster": h.clusterArg(id),
		"cluster_template": encodeArg(t, h.store.templates[templateV137]), "max_batch_size": jsonArg(t, 1)}))
	class, version, _ := h.liveTopology()
	require.NotEqual(t, olderClass, class, "the upgrade renders with this bridge")
	require.Equal(t, "v1.37.1", version)
	require.Equal(t, 1, h.classesApplied())
	require.Equal(t, "v0.2.0", h.kube.clusters()[0].GetAnnotations()[templates.AnnotationRenderedBy])
}

// An upgrade the rows record but no replica has in hand (its handler's replica died) still renders
// afresh when resumed: the cluster's template is no longer the one its Cluster was rendered from.
func TestResumedUpgradeRendersAfresh(t *testing.T) {
	h := newHarness(t)
	id := h.created(2)
	h.renderedByAnOlderBridge()
	h.c.opts.KubernetesVersions = templates.CAPIKubernetesVersions
	h.store.mu.Lock()
	cl := h.store.clusters[id]
	cl.CoeVersion.Set("v1.36.2")
	cl.ClusterTemplateID.Set(templateV137)
	cl.Status.Set(magnum.StatusUpdateInProgress)
	h.store.mu.Unlock()
	h.c.resume(id)
	require.Zero(t, h.settle(10))
	class, version, _ := h.liveTopology()
	require.NotEqual(t, olderClass, class)
	require.Equal(t, "v1.37.1", version)
}

func (h *harness) kubeClusterKey() string {
	cls := h.kube.clusters()
	require.Len(h.t, cls, 1)
	return objKey("Cluster", cls[0].GetNamespace(), cls[0].GetName())
}

// asOlderRendering gives the live Cluster a copy of its class under another name whose workers'
// bootstrap template differs (what an older bridge rendered), and an older version.
func (h *harness) asOlderRendering() {
	h.kube.mu.Lock()
	defer h.kube.mu.Unlock()
	var cluster *unstructured.Unstructured
	var class []*unstructured.Unstructured
	for _, o := range h.kube.objects {
		switch o.GetKind() {
		case "Cluster":
			cluster = o
		case "ClusterClass":
			class = append(class, o)
		}
	}
	require.Len(h.t, class, 1)
	current := class[0].GetName()
	for _, o := range h.kube.objects {
		if !strings.HasPrefix(o.GetName(), current) || o.GetKind() == "Cluster" {
			continue
		}
		b, err := json.Marshal(o.Object)
		require.NoError(h.t, err)
		c := &unstructured.Unstructured{}
		require.NoError(h.t, json.Unmarshal([]byte(strings.ReplaceAll(string(b), current, olderClass)), &c.Object))
		if c.GetKind() == "KubeadmConfigTemplate" {
			require.NoError(h.t, unstructured.SetNestedField(c.Object, "unix:///run/old.sock",
				"spec", "template", "spec", "joinConfiguration", "nodeRegistration", "criSocket"))
		}
		h.kube.objects[objKey(c.GetKind(), c.GetNamespace(), c.GetName())] = c
	}
	require.NoError(h.t, unstructured.SetNestedField(cluster.Object, olderClass, "spec", "topology", "classRef", "name"))
	require.NoError(h.t, unstructured.SetNestedField(cluster.Object, "v1.36.2", "spec", "topology", "version"))
}

func (h *harness) plan(ids ...string) []RenderingPlan {
	h.t.Helper()
	args := map[string]json.RawMessage{}
	if len(ids) > 0 {
		args["clusters"] = jsonArg(h.t, ids)
	}
	res, err := h.deliver(request(MethodRenderingPlan, args), 1)
	require.NoError(h.t, err)
	return res.([]RenderingPlan)
}

// The operator's move: the plan names the cluster, what differs and exactly the machines of the
// groups whose templates differ; the move applies this bridge's class with the cluster's version,
// as an update; then the plan has nothing left to move.
func TestRenderingPlanAndMove(t *testing.T) {
	h := newHarness(t)
	id := h.created(2)
	h.asOlderRendering()
	h.kube.machines = []capi.Machine{
		{Name: "demo-cp-1", ControlPlane: true}, {Name: "demo-w-1", WorkerGroup: "default-worker"}, {Name: "demo-w-2", WorkerGroup: "default-worker"},
	}

	plans := h.plan()
	require.Len(t, plans, 1)
	p := plans[0]
	require.Equal(t, id, p.UUID)
	require.Empty(t, p.Error)
	require.Equal(t, olderClass, p.Class)
	require.NotEqual(t, olderClass, p.CurrentClass)
	require.Equal(t, []string{"worker group default-worker's bootstrap template"}, p.Changes)
	require.False(t, p.ControlPlane)
	require.Equal(t, []string{"default-worker"}, p.Workers)
	require.Equal(t, []string{"demo-w-1", "demo-w-2"}, p.Machines)
	require.True(t, p.Moves())
	require.Equal(t, plans, h.plan(id), "a plan of the named cluster alone")

	_, err := h.deliver(request(string(magnum.OpRenderingMove), map[string]json.RawMessage{"cluster": jsonArg(t, id)}), 1)
	require.NoError(t, err)
	require.Equal(t, magnum.StatusUpdateInProgress, h.store.cluster(t, id).Status.Or(""))
	moving, ok := capi.MovingTo(h.store.cluster(t, id).StatusReason.Or(""))
	require.True(t, ok, "the reason says the move and its class, for the status sync of any replica")
	require.Equal(t, p.CurrentClass, moving)
	_, err = h.deliver(request(string(magnum.OpRenderingMove), map[string]json.RawMessage{"cluster": jsonArg(t, id)}), 1)
	require.ErrorContains(t, err, "UPDATE_IN_PROGRESS", "one move at a time")
	require.Zero(t, h.settle(10))
	class, version, _ := h.liveTopology()
	require.Equal(t, p.CurrentClass, class)
	require.Equal(t, "v1.36.2", version, "a move keeps the cluster's Kubernetes version")
	h.complete(id)

	after := h.plan()
	require.Len(t, after, 1)
	require.Empty(t, after[0].Changes)
	require.Empty(t, after[0].Machines)
	require.False(t, after[0].Moves())

	// The next day-2 operation keeps the moved rendering.
	_, err = h.deliver(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}), 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(10))
	class, version, _ = h.liveTopology()
	require.Equal(t, p.CurrentClass, class)
	require.Equal(t, "v1.36.2", version)
}

func TestRenderingMoveRefusals(t *testing.T) {
	h := newHarness(t)
	_, err := h.deliver(request(string(magnum.OpRenderingMove), map[string]json.RawMessage{}), 1)
	require.ErrorContains(t, err, "the UUID of the cluster to move is required")
	_, err = h.deliver(request(string(magnum.OpRenderingMove), map[string]json.RawMessage{"cluster": jsonArg(t, "5d0c8a1e-0000-4000-8000-000000000000")}), 1)
	require.ErrorContains(t, err, "5d0c8a1e-0000-4000-8000-000000000000")
	_, err = h.deliver(request(MethodRenderingPlan, map[string]json.RawMessage{"clusters": jsonArg(t, "not-a-list")}), 1)
	require.ErrorContains(t, err, "want a list of cluster UUIDs")
}
