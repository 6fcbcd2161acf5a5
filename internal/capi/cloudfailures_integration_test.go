package capi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// countingTransport counts the LISTs (not watches) of CAPO's objects that reach the apiserver.
type countingTransport struct {
	next  http.RoundTripper
	lists atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Query().Get("watch") == "" &&
		(strings.HasSuffix(r.URL.Path, "/openstackservers") || strings.HasSuffix(r.URL.Path, "/openstackclusters")) {
		c.lists.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestCloudFailuresComeFromInformers: CAPO's refusals reach the status sync from the manager's
// informers — a provisioning cluster is synced a few times a minute, and each sync used to cost
// two LISTs — and a refusal written after the first read is seen without another LIST.
func TestCloudFailuresComeFromInformers(t *testing.T) {
	kc := managementCluster(t)
	cfg, err := RESTConfig(kc)
	require.NoError(t, err)
	counter := &countingTransport{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	mgr, err := NewManager(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "mcb-cloudfail-" + hex.EncodeToString(b)
	require.NoError(t, mgr.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = mgr.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	got, err := mgr.Client.CloudFailures(ctx, ns, "c1")
	require.NoError(t, err)
	require.Empty(t, got)
	first := counter.lists.Load()
	require.LessOrEqual(t, first, int64(2), "the informers' initial lists")

	server := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "OpenStackServer",
		"metadata": map[string]any{"name": "c1-cp-a", "namespace": ns, "labels": map[string]any{clusterv1.ClusterNameLabel: "c1"}},
		"spec": map[string]any{"flavor": "m1.medium", "image": map[string]any{"id": "9b1c0e7a-0000-4000-8000-000000000001"},
			"identityRef": map[string]any{"name": "c1-cloud-config", "cloudName": "openstack"}, "ports": []any{map[string]any{}}, "sshKeyName": "default"},
	}}
	require.NoError(t, mgr.Client.Create(ctx, server))
	server.Object["status"] = map[string]any{"ready": false, "conditions": []any{map[string]any{
		"type": "InstanceReady", "status": "False", "severity": "Error", "reason": "InstanceCreateFailed",
		"message": "Quota exceeded for instances", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	require.NoError(t, mgr.Client.Status().Update(ctx, server))

	want := []string{"OpenStackServer c1-cp-a: Quota exceeded for instances"}
	require.Eventually(t, func() bool {
		got, err := mgr.Client.CloudFailures(ctx, ns, "c1")
		return err == nil && len(got) == 1 && got[0] == want[0]
	}, 30*time.Second, 100*time.Millisecond)
	for range 20 {
		_, err := mgr.Client.CloudFailures(ctx, ns, "c1")
		require.NoError(t, err)
	}
	require.Equal(t, first, counter.lists.Load(), "syncs after the first read no LIST of CAPO's objects")
}
