package capi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// managementCluster returns the local management cluster's kubeconfig path.
func managementCluster(t *testing.T) string {
	kc, _ := testutil.ManagementCluster(t)
	return kc
}

// recordingSink keeps the decisions the watch leads to, as the conductor would write them.
type recordingSink struct {
	uuid     string // the test's cluster: other tests' clusters share the management cluster
	mu       sync.Mutex
	cur      Current
	last     Decision
	observed int
	gone     chan string
}

func (s *recordingSink) ClusterObserved(_ context.Context, uuid string, obs Observation) (time.Duration, error) {
	if uuid != s.uuid {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := Decide(s.cur, obs, time.Now())
	s.cur.Status = d.Status
	for i := range s.cur.NodeGroups {
		s.cur.NodeGroups[i].Status = d.NodeGroups[i].Status
	}
	s.last = d
	s.observed++
	return 0, nil
}

func (s *recordingSink) ClusterGone(_ context.Context, ns, name string) error {
	if !strings.HasPrefix(ns, "mcb-capitest") {
		return nil
	}
	s.gone <- ns + "/" + name
	return nil
}

func (s *recordingSink) decision() (Decision, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.observed
}

// TestApplyWatchDelete applies a rendered cluster with the bridge's own CA secrets to the real
// management cluster, follows it through the watch to CREATE_COMPLETE, checks that CAPI used our CA,
// then deletes it and sees it gone.
func TestApplyWatchDelete(t *testing.T) {
	kc := managementCluster(t)
	cfg, err := RESTConfig(kc)
	require.NoError(t, err)
	mgr, err := NewManager(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	project := "capitest" + hex.EncodeToString(b)
	ns := templates.NamespaceFor("mcb-", project)
	in := templates.Input{
		Flavor: templates.FlavorInMemory, Namespace: ns, DefaultKubernetesVersion: "v1.36.3",
		Template: templates.Template{UUID: "d7c6cbe4-3a63-447f-88de-1ab09044b177", ImageID: "ubuntu-2404-kube-v1.36.3"},
		Cluster:  templates.Cluster{UUID: "bd71db63-28f3-4ac5-8e6e-" + hex.EncodeToString(append(b, 0, 0)), Name: "capi-test", ProjectID: project},
		NodeGroups: []templates.NodeGroup{
			{UUID: "11111111-1111-1111-1111-111111111111", Name: "default-master", Role: "master", NodeCount: 1, IsDefault: true},
			{UUID: "22222222-2222-2222-2222-222222222222", Name: "default-worker", Role: "worker", NodeCount: 1, IsDefault: true},
		},
	}
	r, err := templates.Render(in)
	require.NoError(t, err)
	sink := &recordingSink{uuid: in.Cluster.UUID, cur: Current{Status: magnum.StatusCreateInProgress, CreatedAt: time.Now(), CreateTimeout: time.Hour,
		NodeGroups: []NodeGroupState{{UUID: in.NodeGroups[0].UUID, Role: "master", Status: magnum.StatusCreateInProgress, NodeCount: 1},
			{UUID: in.NodeGroups[1].UUID, Role: "worker", Status: magnum.StatusCreateInProgress, NodeCount: 1}}}, gone: make(chan string, 1)}
	require.NoError(t, mgr.Watch(sink))
	go func() { _ = mgr.Start(ctx) }()

	c := mgr.Client
	require.NoError(t, c.EnsureProjectNamespace(ctx, ns, project))
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pki, err := certs.GenerateCluster("capi-test")
	require.NoError(t, err)
	secrets, err := pki.CAPISecrets(r.Cluster.GetName())
	require.NoError(t, err)
	require.NoError(t, c.ApplyClusterSecrets(ctx, ns, in.Cluster.UUID, secrets))
	require.NoError(t, c.Apply(ctx, r.ClassObjects...))
	require.NoError(t, c.Apply(ctx, r.Cluster))
	// Applying again is a no-op: handlers are re-run on redelivery.
	require.NoError(t, c.Apply(ctx, r.ClassObjects...))
	require.NoError(t, c.Apply(ctx, r.Cluster))

	for {
		d, n := sink.decision()
		if d.Status == magnum.StatusCreateComplete {
			require.Equal(t, magnum.HealthHealthy, d.Health)
			require.Regexp(t, `^https://127\.0\.0\.1:\d+$`, d.APIAddress)
			require.Equal(t, "v1.36.3", d.COEVersion)
			t.Logf("CREATE_COMPLETE after %d observations", n)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster not complete: last decision %+v", d)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The workload kubeconfig CAPI wrote trusts the CA the bridge supplied.
	var kcSecret corev1.Secret
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: r.Cluster.GetName() + "-kubeconfig"}, &kcSecret))
	wl, err := clientcmd.Load(kcSecret.Data["value"])
	require.NoError(t, err)
	for _, cl := range wl.Clusters {
		require.Equal(t, pki.KubernetesCA.Stored.Certificate, string(trimNL(cl.CertificateAuthorityData)))
	}

	gone, err := c.DeleteCluster(ctx, ns, r.Cluster.GetName())
	require.NoError(t, err)
	require.False(t, gone)
	select {
	case name := <-sink.gone:
		require.Equal(t, ns+"/"+r.Cluster.GetName(), name)
	case <-ctx.Done():
		t.Fatal("the watch never reported the cluster gone")
	}
	var cl clusterv1.Cluster
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.Cluster.GetName()}, &cl)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.NoError(t, c.DeleteClusterSecrets(ctx, ns, in.Cluster.UUID))
	gone, err = c.DeleteCluster(ctx, ns, r.Cluster.GetName())
	require.NoError(t, err)
	require.True(t, gone)
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}
