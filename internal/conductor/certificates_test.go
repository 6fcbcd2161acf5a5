package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// certificatesConsistent: the cluster row refers to exactly one set of four key pairs, under the
// refs derived from its uuid, that belong together (the client certificate is the CA's), and the
// CAPI Secrets hold that very set.
func (h *harness) certificatesConsistent(id string) *certs.ClusterPKI {
	h.t.Helper()
	cl := h.store.cluster(h.t, id)
	refs := refsOf(cl)
	require.Equal(h.t, certs.ClusterRefs(id), refs, "the row refers to the cluster's refs")
	require.Equal(h.t, 4, h.keys.count(), "nothing orphaned, nothing missing")
	pki, err := certs.NewManager(h.keys).LoadCluster(context.Background(), refs, cl.Name.Or(""))
	require.NoError(h.t, err)
	require.NoError(h.t, pki.MagnumClient.Certificate.CheckSignatureFrom(pki.KubernetesCA.Certificate),
		"the client certificate is signed by the stored CA")
	capi := h.kube.clusters()
	require.Len(h.t, capi, 1)
	want, err := pki.CAPISecrets(capi[0].GetName())
	require.NoError(h.t, err)
	for _, s := range want {
		got, ok := h.kube.secrets[capi[0].GetNamespace()+"/"+s.Name]
		require.True(h.t, ok, "Secret %s applied", s.Name)
		require.Equal(h.t, s.Data, got, "Secret %s holds the stored set", s.Name)
	}
	return pki
}

// A create whose certificate step was interrupted, then redelivered: whatever the interrupted
// attempt left, the cluster ends with one consistent set of four key pairs, referred to by its
// row, with nothing orphaned.
func TestRedeliveredCreateAfterAPartialCertificateStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		// interrupt prepares what the first attempt runs into.
		interrupt func(h *harness, id string)
	}{
		{"the store failed before its commit", func(h *harness, _ string) {
			h.f.failNext("certs.StoreClusterSet", 1, errDBDown)
		}},
		{"the set was committed, its acknowledgement lost", func(h *harness, _ string) {
			h.f.failNext("certs.StoreClusterSet.commit", 1, errDBDown)
		}},
		{"the bridge died after the step, before the Secrets", func(h *harness, _ string) {
			h.f.failNext("kube.ApplyClusterSecrets", 1, errAPIServerDown)
		}},
		{"an earlier version stored two of the four rows one at a time and died", func(h *harness, id string) {
			other, err := certs.GenerateCluster("demo")
			require.NoError(h.t, err)
			refs := certs.ClusterRefs(id)
			h.keys.rows[refs.CACertRef] = other.KubernetesCA.Stored
			h.keys.rows[refs.EtcdCACertRef] = other.EtcdCA.Stored
			h.f.failNext("kube.ApplyClusterSecrets", 1, errAPIServerDown)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			req, id := h.createRequest("demo", 2)
			_, err := h.deliver(req, 1) // the handler records the row; the driver creates
			require.NoError(t, err)
			tc.interrupt(h, id)
			h.settle(1) // the attempt that is interrupted: the process dies here
			_, err = h.redeliver(req)
			require.NoError(t, err)
			require.Zero(t, h.settle(10))
			h.consistent(id, 2)
			pki := h.certificatesConsistent(id)

			// Later applies (an update) load the same set and store nothing.
			h.complete(id)
			from := len(h.f.calls)
			_, err = h.deliver(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}), 1)
			require.NoError(t, err)
			require.Zero(t, h.settle(10))
			h.consistent(id, 3)
			require.Equal(t, pki.KubernetesCA.Certificate.Raw, h.certificatesConsistent(id).KubernetesCA.Certificate.Raw)
			require.NotContains(t, h.f.calls[from:], "certs.StoreClusterSet")
		})
	}
}

// A create whose row was read before another attempt stored that cluster's set: its own set's
// Secrets, applied while it stored, are replaced by the stored set's before the Cluster is applied.
func TestCreateAppliesTheStoredSetWhenAnotherAttemptWon(t *testing.T) {
	h := newHarness(t)
	req, id := h.createRequest("demo", 2)
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	other, err := certs.GenerateCluster("demo")
	require.NoError(t, err)
	refs := certs.ClusterRefs(id)
	h.keys.rows[refs.CACertRef] = other.KubernetesCA.Stored
	h.keys.rows[refs.EtcdCACertRef] = other.EtcdCA.Stored
	h.keys.rows[refs.FrontProxyCACertRef] = other.FrontProxyCA.Stored
	h.keys.rows[refs.MagnumCertRef] = other.MagnumClient.Stored
	require.Zero(t, h.settle(10))
	pki := h.certificatesConsistent(id)
	require.Equal(t, other.KubernetesCA.Certificate.Raw, pki.KubernetesCA.Certificate.Raw, "the set stored first is the cluster's")
}

// What a create's certificate step asks of its ports: one call, which is one transaction in the
// database (db.Store.StoreClusterKeyPairs: BEGIN, INSERT, UPDATE, COMMIT). Before, it was 14: a
// load that missed, four deletes of a possible partial set, four stores, four loads of what was
// just stored, and the refs' UpdateCluster — 38 statements and 9 commits in the database.
func TestCreateStoresItsCertificatesInOneCall(t *testing.T) {
	h := newHarness(t)
	req, id := h.createRequest("demo", 2)
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	from := len(h.f.calls)
	require.Zero(t, h.settle(10))
	var step []string
	for _, op := range h.f.calls[from:] {
		if strings.HasPrefix(op, "certs.") || op == "store.UpdateCluster" {
			step = append(step, op)
		}
	}
	require.Equal(t, []string{"certs.StoreClusterSet", "certs.StoreClusterSet.commit"}, step,
		"one transaction (the .commit entry is the fake's acknowledgement check)")
	h.certificatesConsistent(id)
}

// A failing Barbican is named, with the container, to the caller of ca show/sign and in a create's
// reason, without Barbican's URL; a refusal fails the operation, an unreachable Barbican is retried.
func TestBarbicanFailuresNameTheKeyManager(t *testing.T) {
	href := "https://kms.internal.example:9311/v1/containers/1b4d0f8e-3a2c-4f6e-9d7a-5c8b2e1f0a93"
	missing := fmt.Errorf("certs: load kubernetes CA (ref %s): %w", href,
		&barbican.Error{Op: "read certificate container", Ref: href, Status: http.StatusNotFound, Reason: "Not Found"})
	var me *magnum.Exception
	require.ErrorAs(t, certError(missing), &me)
	assert.Equal(t, "MagnumException", me.Class)
	assert.Equal(t, "The key manager (Barbican) failed: read certificate container 1b4d0f8e-3a2c-4f6e-9d7a-5c8b2e1f0a93: Not Found", me.Message)

	c := New(nil, nil, nil, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	down := &barbican.Error{Op: "store certificate container \"k8s\"", Message: `Get "https://kms.internal.example:9311/": connection refused`,
		Reason: "no answer", Err: errors.New("connection refused")}
	r := c.reasonFor("c", fmt.Errorf("certs: store the key pairs of cluster c: %w", down))
	assert.Contains(t, r, `the key manager (Barbican) failed: store certificate container "k8s": no answer (error id `)
	assert.NotContains(t, r, "kms.internal")
	assert.False(t, permanent(down), "an unreachable Barbican may come back: retried")
	assert.True(t, permanent(&barbican.Error{Op: "store secret", Status: http.StatusForbidden}), "a policy refusal is final")
}
