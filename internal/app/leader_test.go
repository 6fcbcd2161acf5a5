package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestLeaderElectionHandover: two replicas campaign for one Lease on the local management
// cluster; exactly one leads and runs the leader work; when it stops (releasing the Lease) the
// other takes over within a few seconds.
func TestLeaderElectionHandover(t *testing.T) {
	_, cfg := testutil.ManagementCluster(t)
	name := "mcbtest-lease-" + uuid.NewString()[:8]
	namespace := name // a namespace of its own, removed with its Lease
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{})
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	type replica struct {
		l      *leadership
		cancel context.CancelFunc
		done   chan struct{}
		worked atomic.Int32
	}
	start := func(host string) *replica {
		r := &replica{done: make(chan struct{})}
		r.l = newLeadership(host, namespace, name, log, func(ctx context.Context) {
			r.worked.Add(1)
			<-ctx.Done()
		}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { defer close(r.done); _ = r.l.Run(ctx, cfg) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	a, b := start("replica-a"), start("replica-b")
	var leader, follower *replica
	require.Eventually(t, func() bool {
		switch {
		case a.l.Leading() && !b.l.Leading():
			leader, follower = a, b
		case b.l.Leading() && !a.l.Leading():
			leader, follower = b, a
		default:
			return false
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "exactly one replica leads")
	require.Eventually(t, func() bool { return leader.worked.Load() == 1 }, 5*time.Second, 50*time.Millisecond)
	assert.Equal(t, int32(0), follower.worked.Load())
	require.Eventually(t, func() bool { return strings.Contains(follower.l.State(), leader.l.identity) }, 10*time.Second, 100*time.Millisecond)

	stopped := time.Now()
	leader.cancel()
	<-leader.done
	require.Eventually(t, follower.l.Leading, 10*time.Second, 50*time.Millisecond, "the follower takes over a released Lease")
	t.Logf("takeover %.1f s after the leader stopped (released Lease)", time.Since(stopped).Seconds())
	require.Eventually(t, func() bool { return follower.worked.Load() == 1 }, 5*time.Second, 50*time.Millisecond)
	assert.False(t, leader.l.Leading())
}
