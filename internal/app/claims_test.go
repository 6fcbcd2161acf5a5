package app

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestOperationClaimsOnLeases: the claims of two replicas on the local management cluster's
// apiserver — one holder at a time, renewals, a takeover only after expiry, release only by the
// holder, concurrent claimants with exactly one winner, and the sweep of expired claims.
func TestOperationClaimsOnLeases(t *testing.T) {
	_, cfg := testutil.ManagementCluster(t)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	namespace := "mcbtest-claims-" + uuid.NewString()[:8]
	ctx := context.Background()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{}) })

	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	replica := func(name string) *leaseClaims {
		return &leaseClaims{leases: cs.CoordinationV1(), namespace: namespace, identity: name, now: clock}
	}
	a, b := replica("a"), replica("b")
	id := uuid.NewString()
	holder := func() string {
		l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, claimPrefix+id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		require.NoError(t, err)
		return *l.Spec.HolderIdentity
	}

	ok, err := a.Claim(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.Claim(ctx, id)
	require.NoError(t, err)
	require.False(t, ok, "a holds it")
	advance(15 * time.Second)
	ok, err = a.Claim(ctx, id)
	require.NoError(t, err)
	require.True(t, ok, "a renews")
	advance(15 * time.Second)
	ok, err = b.Claim(ctx, id)
	require.NoError(t, err)
	require.False(t, ok, "renewed 15 s ago: still a's")
	advance(6 * time.Second)
	ok, err = b.Claim(ctx, id)
	require.NoError(t, err)
	require.True(t, ok, "a stopped renewing (died): b takes over")
	require.Equal(t, "b", holder())
	require.NoError(t, a.Release(ctx, id))
	require.Equal(t, "b", holder(), "a cannot release what b holds")
	require.NoError(t, b.Release(ctx, id))
	require.Empty(t, holder())

	// A replica restarted (same host, new process) takes its previous life's claims at once.
	before := &leaseClaims{leases: cs.CoordinationV1(), namespace: namespace, identity: "ctl-1_100_aaaaaaaa", host: "ctl-1", now: clock}
	after := &leaseClaims{leases: cs.CoordinationV1(), namespace: namespace, identity: "ctl-1_200_bbbbbbbb", host: "ctl-1", now: clock}
	other := &leaseClaims{leases: cs.CoordinationV1(), namespace: namespace, identity: "ctl-10_300_cccccccc", host: "ctl-10", now: clock}
	restarted := uuid.NewString()
	ok, err = before.Claim(ctx, restarted)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = other.Claim(ctx, restarted)
	require.NoError(t, err)
	require.False(t, ok, "another host waits for the expiry")
	ok, err = after.Claim(ctx, restarted)
	require.NoError(t, err)
	require.True(t, ok, "the same host's next process takes it at once")
	ok, err = before.Claim(ctx, restarted)
	require.NoError(t, err)
	require.True(t, ok, "(a live process of the same host — a misconfiguration — would take it back: at least once)")
	ok, err = other.Claim(ctx, restarted)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, before.Release(ctx, restarted))

	// The same replica renewing one claim from two goroutines (driver and renewal loop) keeps it.
	own := uuid.NewString()
	ok, err = a.Claim(ctx, own)
	require.NoError(t, err)
	require.True(t, ok)
	advance(claimFresh) // so that the renewals below write, and race
	var renewals sync.WaitGroup
	lost := make(chan struct{}, 3)
	for range 3 {
		renewals.Add(1)
		go func() {
			defer renewals.Done()
			if ok, err := a.Claim(ctx, own); err != nil || !ok {
				lost <- struct{}{}
			}
		}()
	}
	renewals.Wait()
	require.Empty(t, lost, "a replica's concurrent renewals of its own claim all hold it")
	require.NoError(t, a.Release(ctx, own))

	// A claim written moments ago (a create's handler, then its driver) is held without a write;
	// later renewals write.
	fresh := uuid.NewString()
	version := func() string {
		l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, claimPrefix+fresh, metav1.GetOptions{})
		require.NoError(t, err)
		return l.ResourceVersion
	}
	ok, err = a.Claim(ctx, fresh)
	require.NoError(t, err)
	require.True(t, ok)
	first := version()
	ok, err = a.Claim(ctx, fresh)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, first, version(), "claimed moments ago: no second write")
	advance(claimFresh)
	ok, err = a.Claim(ctx, fresh)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotEqual(t, first, version(), "a renewal writes")
	require.NoError(t, a.Release(ctx, fresh))

	// Racing claimants of a free cluster: exactly one wins.
	race := uuid.NewString()
	var wg sync.WaitGroup
	wins := make(chan string, 4)
	for _, r := range []*leaseClaims{replica("r1"), replica("r2"), replica("r3"), replica("r4")} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := r.Claim(ctx, race); err == nil && ok {
				wins <- r.identity
			}
		}()
	}
	wg.Wait()
	close(wins)
	require.Len(t, wins, 1)

	// Sweep: expired claims of clusters not in progress go; live or active ones stay.
	done, live := uuid.NewString(), uuid.NewString()
	for _, x := range []string{done, live} {
		ok, err := a.Claim(ctx, x)
		require.NoError(t, err)
		require.True(t, ok)
	}
	advance(25 * time.Second)
	ok, err = a.Claim(ctx, live)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, b.Sweep(ctx, func(x string) bool { return x == race }))
	list, err := cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: claimSelector})
	require.NoError(t, err)
	var left []string
	for _, l := range list.Items {
		left = append(left, l.Name)
	}
	require.ElementsMatch(t, []string{claimPrefix + live, claimPrefix + race}, left)
}
