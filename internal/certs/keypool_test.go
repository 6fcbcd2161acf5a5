package certs

import (
	"context"
	"crypto/rsa"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// filledPool is a pool of size keys that makes no more (its context is over once it is full).
func filledPool(t *testing.T, size int) *KeyPool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool := NewKeyPool(ctx, 2048, size)
	require.Eventually(t, func() bool { return pool.Ready() == size }, time.Minute, 10*time.Millisecond, "the pool fills up")
	cancel()
	<-pool.stopped
	return pool
}

func TestKeyPoolHandsOutEachKeyOnce(t *testing.T) {
	pool := filledPool(t, 3)
	seen := map[string]bool{}
	for i := range 5 { // three from the pool, then generated on demand
		key, err := pool.take(2048)
		require.NoError(t, err)
		require.Equal(t, 2048, key.N.BitLen())
		require.False(t, seen[key.N.String()], "a key was handed out twice")
		seen[key.N.String()] = true
		require.Equal(t, max(0, 2-i), pool.Ready())
	}
	// Another size is generated, not taken from the pool.
	pool = filledPool(t, 1)
	key, err := pool.take(3072)
	require.NoError(t, err)
	require.Equal(t, 3072, key.N.BitLen())
	require.Equal(t, 1, pool.Ready())
	var none *KeyPool
	_, err = none.take(2048)
	require.NoError(t, err, "no pool: generated")
}

func TestClusterPKIUsesThePool(t *testing.T) {
	pool := filledPool(t, 4)
	pki, err := GenerateClusterWithOptions("pool-test", GenerateOptions{Keys: pool})
	require.NoError(t, err)
	require.Zero(t, pool.Ready(), "the four keys came from the pool")
	require.Equal(t, 2048, pki.KubernetesCA.Key.(*rsa.PrivateKey).N.BitLen())
}

// An empty pool generates on demand, but never more keys at once than it has slots (GOMAXPROCS in
// production); a taker waiting for a slot takes a key the filler finished meanwhile.
func TestKeyPoolBoundsOnDemandGeneration(t *testing.T) {
	key := rsaKey(t, 2048)
	var running, most atomic.Int32
	release := make(chan struct{})
	pool := &KeyPool{bits: 2048, keys: make(chan *rsa.PrivateKey, 4), slots: make(chan struct{}, 2),
		generate: func(int) (*rsa.PrivateKey, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			return key, nil
		}}
	var wg sync.WaitGroup
	taken := make(chan *rsa.PrivateKey, 8)
	for range 8 { // two clusters' keys in a burst
		wg.Go(func() {
			k, err := pool.take(2048)
			assert.NoError(t, err)
			taken <- k
		})
	}
	require.Eventually(t, func() bool { return running.Load() == 2 }, 10*time.Second, time.Millisecond)
	filled := new(rsa.PrivateKey) // stands for a key the filler finished
	pool.keys <- filled
	got := <-taken
	require.Same(t, filled, got, "a waiting taker takes the filler's key")
	close(release)
	wg.Wait()
	require.EqualValues(t, 2, most.Load(), "no more generations at once than slots")
}
