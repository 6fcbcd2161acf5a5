package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// The conductor against in-process fakes of its ports: every handler × (first run, redelivery,
// a crash after each write, a transient error at each step, a permanent error). A "crash" is a
// handler or driver run that stops at an injected failure; the next run (retry, redelivery or the
// start-up resync) must finish the operation and leave rows and CAPI objects consistent.

type harness struct {
	t     *testing.T
	f     *faults
	store *fakeStore
	kube  *fakeKube
	keys  *memKeyPairs
	c     *Conductor

	mu  sync.Mutex
	now time.Time
}

const (
	templateV136 = "7b0a3f6e-1111-4c4c-8a8a-000000000136"
	templateV137 = "7b0a3f6e-1111-4c4c-8a8a-000000000137"
)

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, f: newFaults(), now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	h.store = newFakeStore(h.f, h.clock)
	h.kube = newFakeKube(h.f)
	h.keys = &memKeyPairs{f: h.f, rows: map[string]certs.KeyPair{}, store: h.store}
	for id, image := range map[string]string{templateV136: "ubuntu-2404-kube-v1.36.3", templateV137: "ubuntu-2404-kube-v1.37.1"} {
		tmpl := &magnum.ClusterTemplate{}
		tmpl.UUID.Set(id)
		tmpl.Name.Set(image)
		tmpl.COE.Set("kubernetes")
		tmpl.ImageID.Set(image)
		tmpl.FlavorID.Set("m1.small")
		tmpl.MasterFlavorID.Set("m1.medium")
		tmpl.Labels.Set(magnum.NewDict())
		h.store.templates[id] = tmpl
	}
	h.c = New(h.store, h.kube, certs.NewManager(h.keys), Options{
		Flavor: templates.FlavorInMemory, NamespacePrefix: "magnum-", DefaultKubernetesVersion: "v1.36.3",
		Now:    h.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now = h.now.Add(d)
}

// deliver runs a handler as the rpc server does: a Retry error runs it again (the same delivery,
// attempt+1) up to attempts times; the last error is returned.
func (h *harness) deliver(req *rpc.Request, attempts int) (any, error) {
	handler := h.c.Handlers()[req.Method]
	require.NotNil(h.t, handler, req.Method)
	var (
		res any
		err error
	)
	for a := 1; a <= attempts; a++ {
		req.Attempt = a
		res, err = handler(context.Background(), req)
		if !rpc.IsRetryable(err) {
			return res, err
		}
	}
	return res, err
}

// redeliver is the same message after a crash of the bridge: a fresh delivery, marked redelivered.
func (h *harness) redeliver(req *rpc.Request) (any, error) {
	r := *req
	r.Redelivered = true
	r.FirstAttempt = time.Now()
	return h.deliver(&r, 1)
}

// settle runs the operation driver for every queued cluster until nothing is left to retry or
// maxRuns is reached; it returns how many driver runs asked for a retry.
func (h *harness) settle(maxRuns int) (retries int) {
	retries, _ = settleOn(h.c, maxRuns)
	return retries
}

// settleOn is settle on one replica's conductor; waiting counts the runs that found the claim
// held by another replica (they are not queued again: the tests run that replica's recheck).
func settleOn(c *Conductor, maxRuns int) (retries, waiting int) {
	for range maxRuns {
		if c.ops.queue.Len() == 0 {
			return retries, waiting
		}
		id, _ := c.ops.queue.Get()
		again, err := c.drive(context.Background(), id)
		c.ops.queue.Done(id)
		switch {
		case errors.Is(err, errClaimHeld):
			waiting++
			c.ops.queue.Forget(id)
		case again:
			retries++
			c.ops.queue.Add(id) // at once: the tests move the clock themselves
		default:
			c.ops.queue.Forget(id)
			c.ops.idle(id)
		}
	}
	return retries, waiting
}

// complete is the status sync seeing CAPI converge: the cluster and its groups become *_COMPLETE.
func (h *harness) complete(id string) {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	to := func(s magnum.ClusterStatus) magnum.ClusterStatus {
		return magnum.ClusterStatus(strings.Replace(string(s), "IN_PROGRESS", "COMPLETE", 1))
	}
	c := cloneCluster(h.store.clusters[id])
	c.Status.Set(to(c.Status.Or("")))
	c.StatusReason.Set("")
	h.store.clusters[id] = c
	for k, g := range h.store.groups {
		if g.ClusterID.Or("") == id {
			g = cloneGroup(g)
			g.Status.Set(to(g.Status.Or("")))
			h.store.groups[k] = g
		}
	}
}

func (h *harness) createRequest(name string, workers int) (*rpc.Request, string) {
	id := uuid.NewString()
	cl := &magnum.Cluster{}
	cl.UUID.Set(id)
	cl.Name.Set(name)
	cl.ProjectID.Set(demoProject)
	cl.UserID.Set("demo-user")
	cl.ClusterTemplateID.Set(templateV136)
	cl.Labels.Set(magnum.NewDict())
	return request("cluster_create", map[string]json.RawMessage{
		"cluster": encodeArg(h.t, cl), "master_count": jsonArg(h.t, 1), "node_count": jsonArg(h.t, workers),
		"create_timeout": jsonArg(h.t, 60)}), id
}

// created makes a CREATE_COMPLETE cluster with the given workers.
func (h *harness) created(workers int) string {
	req, id := h.createRequest("demo", workers)
	_, err := h.deliver(req, 1)
	require.NoError(h.t, err)
	require.Zero(h.t, h.settle(10))
	h.complete(id)
	return id
}

func (h *harness) clusterArg(id string) json.RawMessage {
	return encodeArg(h.t, h.store.cluster(h.t, id))
}

// consistent checks what every test ends with: one CAPI Cluster, one CA (four key pairs), and
// node counts equal on both sides.
func (h *harness) consistent(id string, workers int) {
	h.t.Helper()
	require.Len(h.t, h.kube.clusters(), 1, "exactly one CAPI Cluster")
	require.Equal(h.t, 4, h.keys.count(), "one CA set per cluster, generated once")
	require.EqualValues(h.t, workers, h.store.group(h.t, id, "default-worker").NodeCount.Or(-1))
	require.EqualValues(h.t, workers, h.kube.workerReplicas(h.t, "default-worker"))
}

// Every step of a create failing once (transient), then the same delivery retried, a redelivery,
// and the driver: one cluster, one CA, the requested size.
func TestCreateSurvivesATransientFailureAtEveryStep(t *testing.T) {
	steps := []struct{ op string }{
		{"store.GetCluster"}, {"store.GetClusterTemplate"}, {"store.CreateCluster"}, {"store.ListNodeGroups"},
		{"store.UpdateCluster"}, {"certs.StoreClusterSet"}, {"certs.StoreClusterSet.commit"}, {"kube.EnsureProjectNamespace"}, {"kube.ApplyClusterSecrets"},
		{"kube.Apply"},
	}
	for _, step := range steps {
		t.Run(step.op, func(t *testing.T) {
			h := newHarness(t)
			req, id := h.createRequest("demo", 2)
			var err error = errAPIServerDown
			if strings.HasPrefix(step.op, "store.") || strings.HasPrefix(step.op, "certs.") {
				err = errDBDown
			}
			h.f.failNext(step.op, 1, err)
			_, herr := h.deliver(req, 3)
			require.NoError(t, herr)
			_, herr = h.redeliver(req) // the bridge died before acknowledging: the message comes back
			require.NoError(t, herr)
			h.settle(20)
			require.Equal(t, magnum.StatusCreateInProgress, h.store.cluster(t, id).Status.Or(""), "in progress until CAPI converges")
			h.consistent(id, 2)
		})
	}
}

// The first scenario of the issue: the apiserver is down when `coe cluster update node_count=3`
// arrives. Before the fix the handler wrote UPDATE_IN_PROGRESS, failed, and its retry refused
// its own state; the update was lost.
func TestUpdateDuringAnAPIServerOutageIsNotLost(t *testing.T) {
	h := newHarness(t)
	id := h.created(2)
	req := request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)})

	h.f.failNext("kube.Apply", -1, errAPIServerDown) // down for a while
	_, err := h.deliver(req, 1)
	require.NoError(t, err, "the intent is recorded and the message acknowledged")
	require.Equal(t, magnum.StatusUpdateInProgress, h.store.cluster(t, id).Status.Or(""))
	require.Positive(t, h.settle(5), "the driver retries while the apiserver is down")
	_, err = h.redeliver(req) // and a redelivery of the same request resumes instead of refusing
	require.NoError(t, err)

	h.advance(40 * time.Second)
	h.f.clear() // the apiserver is back
	require.Zero(t, h.settle(10))
	h.consistent(id, 3)
	require.Equal(t, magnum.StatusUpdateInProgress, h.store.cluster(t, id).Status.Or(""))
	require.Equal(t, []bool{false, true}, h.kube.addonPrunes[h.store.cluster(t, id).StackID.Or("")],
		"the create's add-on set prunes nothing; the update's prunes what it drops")
}

// A crash after each write of each day-2 handler, then a redelivery: the operation is resumed.
func TestDayTwoHandlersResumeAfterACrashAtEachWrite(t *testing.T) {
	type op struct {
		name    string
		request func(h *harness, id string) *rpc.Request
		check   func(h *harness, id string)
	}
	ops := []op{
		{"update", func(h *harness, id string) *rpc.Request {
			return request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(h.t, 3)})
		}, func(h *harness, id string) { h.consistent(id, 3) }},
		{"resize with nodes_to_remove", func(h *harness, id string) *rpc.Request {
			w := h.store.group(h.t, id, "default-worker")
			return request("cluster_resize", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(h.t, 1),
				"nodes_to_remove": jsonArg(h.t, []string{"node-a"}), "nodegroup": encodeArg(h.t, w)})
		}, func(h *harness, id string) {
			h.consistent(id, 1)
			require.Contains(h.t, h.kube.marked, "node-a")
		}},
		{"control-plane resize", func(h *harness, id string) *rpc.Request {
			m := h.store.group(h.t, id, "default-master")
			return request("cluster_resize", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(h.t, 3),
				"nodegroup": encodeArg(h.t, m)})
		}, func(h *harness, id string) {
			h.consistent(id, 2)
			require.EqualValues(h.t, 3, h.kube.controlPlaneReplicas(h.t))
		}},
		{"node group create", func(h *harness, id string) *rpc.Request {
			ng := workerGroup(id, "9a9a9a9a-0000-4000-8000-000000000001", "batch", 2)
			ng.FlavorID.Set("m1.small")
			return request("nodegroup_create", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(h.t, ng)})
		}, func(h *harness, id string) {
			h.consistent(id, 2)
			require.EqualValues(h.t, 2, h.kube.workerReplicas(h.t, "batch"))
		}},
		{"upgrade", func(h *harness, id string) *rpc.Request {
			tmpl := h.store.templates[templateV137]
			return request("cluster_upgrade", map[string]json.RawMessage{"cluster": h.clusterArg(id),
				"cluster_template": encodeArg(h.t, tmpl), "max_batch_size": jsonArg(h.t, 1)})
		}, func(h *harness, id string) {
			h.consistent(id, 2)
			require.Equal(h.t, templateV137, h.store.cluster(h.t, id).ClusterTemplateID.Or(""))
			v, _, _ := unstructuredString(h.kube.clusters()[0].Object, "spec", "topology", "version")
			require.Equal(h.t, "v1.37.1", v)
		}},
	}
	writes := []string{"store.UpdateNodeGroup", "store.UpdateCluster", "store.CreateNodeGroup", "kube.Apply"}
	for _, o := range ops {
		for _, w := range writes {
			t.Run(o.name+"/crash at "+w, func(t *testing.T) {
				h := newHarness(t)
				id := h.created(2)
				h.keys.f = h.f
				if o.name == "upgrade" {
					// The target, v1.37.1, is past the add-on table (v1.36): these are the upgrade's
					// mechanics, so the harness accepts what Cluster API v1.14 does.
					h.c.opts.KubernetesVersions = templates.CAPIKubernetesVersions
					h.store.mu.Lock()
					h.store.clusters[id].CoeVersion.Set("v1.36.3")
					h.store.mu.Unlock()
				}
				req := o.request(h, id)
				h.f.failNext(w, 1, errDBDown)
				_, err := h.deliver(req, 1) // the process dies at the injected failure: no retry here
				if err != nil {
					require.True(t, rpc.IsRetryable(err), "a crash is never a refusal: %v", err)
				}
				h.settle(3) // whatever the driver managed before the crash
				_, err = h.redeliver(req)
				require.NoError(t, err)
				require.Zero(t, h.settle(10))
				o.check(h, id)
			})
		}
	}
}

// workerGroup is a worker node group of the demo project, as magnum-api sends it.
func workerGroup(clusterID, uuid, name string, nodes int64) *magnum.NodeGroup {
	ng := &magnum.NodeGroup{}
	ng.UUID.Set(uuid)
	ng.Name.Set(name)
	ng.ClusterID.Set(clusterID)
	ng.ProjectID.Set(demoProject)
	ng.Role.Set("worker")
	ng.NodeCount.Set(nodes)
	return ng
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// Node group delete: DELETE_IN_PROGRESS survives a crash, the group leaves the topology.
func TestNodeGroupDeleteResumes(t *testing.T) {
	h := newHarness(t)
	id := h.created(2)
	ng := workerGroup(id, "9a9a9a9a-0000-4000-8000-000000000002", "batch", 1)
	_, err := h.deliver(request("nodegroup_create", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(t, ng)}), 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(10))
	h.complete(id)

	req := request("nodegroup_delete", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(t, h.store.group(t, id, "batch"))})
	h.f.failNext("store.UpdateCluster", 1, errDBDown)
	_, err = h.deliver(req, 1)
	require.True(t, rpc.IsRetryable(err))
	_, err = h.redeliver(req)
	require.NoError(t, err)
	require.Zero(t, h.settle(10))
	require.Equal(t, magnum.StatusDeleteInProgress, h.store.group(t, id, "batch").Status.Or(""))
	mds, _, _ := unstructuredSlice(h.kube.clusters()[0].Object, "spec", "topology", "workers", "machineDeployments")
	require.Len(t, mds, 1, "only default-worker is left in the topology")
}

func unstructuredSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

// Delete: failures at each step, a crash, CAPI finishing later: rows, CAs and secrets all go.
func TestDeleteResumesAfterAFailureAtEachStep(t *testing.T) {
	for _, step := range []string{"store.UpdateCluster", "store.UpdateNodeGroup", "kube.DeleteCluster", "kube.DeleteClusterSecrets", "store.DeleteCluster"} {
		t.Run(step, func(t *testing.T) {
			h := newHarness(t)
			id := h.created(2)
			req := request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, id)})
			h.f.failNext(step, 1, errDBDown)
			_, err := h.deliver(req, 1)
			if err != nil {
				require.True(t, rpc.IsRetryable(err))
				_, err = h.redeliver(req)
				require.NoError(t, err)
			}
			h.settle(10)
			require.Equal(t, magnum.StatusDeleteInProgress, h.store.cluster(t, id).Status.Or(""))
			h.kube.finishDeleting() // CAPI removed the machines and the Cluster
			require.NoError(t, h.c.ClusterGone(context.Background(), "magnum-"+demoProject, h.store.cluster(t, id).StackID.Or("")))
			h.settle(10)
			_, err = h.store.GetCluster(context.Background(), id)
			require.ErrorIs(t, err, ErrNotFound, "rows removed")
			require.Zero(t, h.keys.count(), "certificates removed")
			require.Empty(t, h.kube.clusters())
		})
	}
}

// A permanent refusal fails the operation at once with a reason the tenant can act on.
func TestPermanentErrorFailsTheUpdateAtOnce(t *testing.T) {
	h := newHarness(t)
	id := h.created(2)
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}, "demo",
		field.ErrorList{field.Invalid(field.NewPath("spec", "topology", "version"), "v9", "unsupported version")})
	h.f.failNext("kube.Apply", 1, invalid)
	_, err := h.deliver(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}), 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(5), "a permanent error is not retried")
	cl := h.store.cluster(t, id)
	require.Equal(t, magnum.StatusUpdateFailed, cl.Status.Or(""))
	require.Contains(t, cl.StatusReason.Or(""), "unsupported version")
	require.Equal(t, magnum.StatusUpdateFailed, h.store.group(t, id, "default-worker").Status.Or(""))
}

// Transient failures are retried only until the deadline; then the reason names the failing
// service and an error id, never the internal endpoint.
func TestTransientErrorsEndAtTheDeadlineWithoutInternals(t *testing.T) {
	h := newHarness(t)
	h.c.opts.UpdateTimeout = 10 * time.Minute
	id := h.created(2)
	h.f.failNext("kube.Apply", -1, errAPIServerDown)
	_, err := h.deliver(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}), 1)
	require.NoError(t, err)
	require.Equal(t, 3, h.settle(3))
	require.Equal(t, magnum.StatusUpdateInProgress, h.store.cluster(t, id).Status.Or(""))
	h.advance(11 * time.Minute)
	h.settle(3)
	cl := h.store.cluster(t, id)
	require.Equal(t, magnum.StatusUpdateFailed, cl.Status.Or(""))
	reason := cl.StatusReason.Or("")
	require.Contains(t, reason, "update_timeout of 10m0s")
	require.Contains(t, reason, "the management cluster failed (error id ")
	require.NotContains(t, reason, "127.0.0.1")
	require.NotContains(t, reason, "https://")
}

// A create refused after magnum-api's 202 records why in a CREATE_FAILED row — except when its
// template is gone: magnum-api cannot show such a row, and it would break the project's cluster list.
func TestRefusedCreateLeavesAFailedRow(t *testing.T) {
	h := newHarness(t)
	req, id := h.createRequest("demo", 1)
	req.Args["master_count"] = jsonArg(t, 0)
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	cl := h.store.cluster(t, id)
	require.Equal(t, magnum.StatusCreateFailed, cl.Status.Or(""))
	require.Contains(t, cl.StatusReason.Or(""), "master_count 0")
	require.Equal(t, magnum.StatusCreateFailed, h.store.group(t, id, "default-worker").Status.Or(""))
	require.Empty(t, h.kube.clusters())

	req, id = h.createRequest("gone", 1)
	delete(h.store.templates, templateV136)
	_, err = h.deliver(req, 1)
	var me *magnum.Exception
	require.ErrorAs(t, err, &me)
	require.Contains(t, me.Message, "does not exist")
	_, err = h.store.GetCluster(context.Background(), id)
	require.ErrorIs(t, err, ErrNotFound, "no row naming a template that does not exist")
}

// Tenant checks come from the rows: an existing uuid of another project, a node group whose
// message names another cluster.
func TestTenantChecksUseTheStoredRows(t *testing.T) {
	h := newHarness(t)
	id := h.created(1)

	other, _ := h.createRequest("other", 1)
	cl := h.store.cluster(t, id)
	cl.ProjectID.Set("another-project")
	other.Args["cluster"] = encodeArg(t, cl)
	other.Context = &rpc.Context{ProjectID: "another-project", AuthToken: "t"}
	_, err := h.deliver(other, 1)
	require.ErrorIs(t, err, magnum.ErrAuthorizationFailure, "a uuid of another project's cluster is not touched")
	require.Equal(t, demoProject, h.store.cluster(t, id).ProjectID.Or(""))

	ng := &magnum.NodeGroup{}
	ng.UUID.Set("9a9a9a9a-0000-4000-8000-000000000003")
	ng.Name.Set("forged")
	ng.ClusterID.Set(uuid.NewString()) // the message names another cluster and project
	ng.ProjectID.Set("another-project")
	ng.Role.Set("worker")
	ng.NodeCount.Set(1)
	_, err = h.deliver(request("nodegroup_create", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(t, ng)}), 1)
	require.NoError(t, err)
	stored := h.store.group(t, id, "forged")
	require.Equal(t, id, stored.ClusterID.Or(""))
	require.Equal(t, demoProject, stored.ProjectID.Or(""))
}

// Read-only calls get no serialization key, so they never wait behind a cluster's write.
func TestReadOnlyCallsDoNotWaitBehindWrites(t *testing.T) {
	cluster := json.RawMessage(`{"magnum_object.data":{"uuid":"c1"}}`)
	for _, m := range []string{"get_ca_certificate", "sign_certificate", "ping_conductor"} {
		require.Empty(t, KeyFunc(&rpc.Request{Method: m, Args: map[string]json.RawMessage{"cluster": cluster}}), m)
	}
	require.Equal(t, "c1", KeyFunc(&rpc.Request{Method: "cluster_update", Args: map[string]json.RawMessage{"cluster": cluster}}))
}

// Start-up resync resumes every operation in progress, not only creates.
func TestResyncResumesEveryOperation(t *testing.T) {
	h := newHarness(t)
	id := h.created(2)
	h.f.failNext("kube.Apply", -1, errAPIServerDown)
	_, err := h.deliver(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 4)}), 1)
	require.NoError(t, err)
	h.settle(2)

	// The bridge restarts: a new conductor over the same state, an empty queue.
	h.f.clear()
	h.c = New(h.store, h.kube, certs.NewManager(h.keys), h.c.opts)
	require.NoError(t, h.c.Resync(context.Background()))
	require.Zero(t, h.settle(10))
	h.consistent(id, 4)
}

func TestReasonsNeverCarryEndpoints(t *testing.T) {
	c := New(nil, nil, nil, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r := c.reasonFor("c", &permanentError{errors.New(`Keystone refused: POST https://keystone.internal:5000/v3/x failed from 10.1.2.3:443`)})
	require.NotContains(t, r, "keystone.internal")
	require.NotContains(t, r, "10.1.2.3")
	require.Contains(t, r, "Keystone refused")
	r = c.reasonFor("c", errDBDown)
	require.Contains(t, r, "Magnum's database failed (error id ")
	require.NotContains(t, r, "3306")
}

// An apiserver that just restarted answers 403 until its RBAC caches are filled: retried, not failed.
func TestForbiddenRightAfterAnAPIServerRestartIsRetried(t *testing.T) {
	h := newHarness(t)
	id := h.created(2)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "magnum-x", errors.New("RBAC: not yet"))
	h.f.failNext("kube.EnsureProjectNamespace", 2, forbidden)
	_, err := h.deliver(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}), 1)
	require.NoError(t, err)
	require.Equal(t, 2, h.settle(10))
	h.consistent(id, 3)
	require.Equal(t, magnum.StatusUpdateInProgress, h.store.cluster(t, id).Status.Or(""))
}

// A replica of a release without operation claims may apply the create it was running after this
// replica finished the cluster's delete: the CAPI Cluster is back without a row. This replica's next
// look deletes it again, with the cluster's Secrets and add-ons; after afterDeleteWatch it stops
// looking, and a Cluster of another cluster under that name is never touched.
func TestADeletedClusterReappliedByAnOlderReplicaIsDeletedAgain(t *testing.T) {
	h := newHarness(t)
	id := h.created(1)
	key := h.kubeClusterKey()
	applied := h.kube.objects[key].DeepCopy()
	stack := h.store.cluster(t, id).StackID.Or("")
	_, err := h.deliver(request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, id)}), 1)
	require.NoError(t, err)
	h.settle(10)
	h.kube.finishDeleting()
	require.NoError(t, h.c.ClusterGone(context.Background(), "magnum-"+demoProject, stack))
	h.settle(10)
	_, err = h.store.GetCluster(context.Background(), id)
	require.ErrorIs(t, err, ErrNotFound)

	// The older replica's create applies now.
	h.kube.mu.Lock()
	h.kube.objects[key] = applied.DeepCopy()
	h.kube.mu.Unlock()
	again, err := h.c.drive(context.Background(), id) // the next look (afterDeleteCheck)
	require.NoError(t, err)
	require.False(t, again)
	require.True(t, h.kube.deleting[key], "deleted again")
	h.kube.finishDeleting()

	// Past the watch, nothing is looked at any more.
	h.kube.mu.Lock()
	h.kube.objects[key] = applied.DeepCopy()
	h.kube.mu.Unlock()
	h.advance(afterDeleteWatch)
	_, err = h.c.drive(context.Background(), id)
	require.NoError(t, err)
	require.False(t, h.kube.deleting[key], "no longer watched")

	// Within the watch, a Cluster of that name that is not this cluster's stays.
	other := h.created(1)
	otherKey := h.kubeClusterKeyOf(other)
	_, err = h.deliver(request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, other)}), 1)
	require.NoError(t, err)
	h.settle(10)
	h.kube.finishDeleting()
	require.NoError(t, h.c.ClusterGone(context.Background(), "magnum-"+demoProject, strings.Split(otherKey, "/")[2]))
	h.settle(10)
	stranger := applied.DeepCopy()
	stranger.SetName(strings.Split(otherKey, "/")[2])
	stranger.SetLabels(map[string]string{templates.LabelClusterUUID: "someone-else"})
	h.kube.mu.Lock()
	h.kube.objects[otherKey] = stranger
	h.kube.mu.Unlock()
	_, err = h.c.drive(context.Background(), other)
	require.NoError(t, err)
	require.False(t, h.kube.deleting[otherKey], "not this cluster's Cluster")
}

// kubeClusterKeyOf is the key of cluster id's CAPI Cluster in the fake.
func (h *harness) kubeClusterKeyOf(id string) string {
	h.t.Helper()
	for _, c := range h.kube.clusters() {
		if c.GetLabels()[templates.LabelClusterUUID] == id {
			return objKey("Cluster", c.GetNamespace(), c.GetName())
		}
	}
	h.t.Fatalf("no CAPI Cluster of %s", id)
	return ""
}
