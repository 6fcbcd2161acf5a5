package certs

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"runtime"
)

// KeyPool keeps RSA keys generated ahead of demand, so that a cluster create does not wait for its
// four keys (the largest part of its cost before the first apply). A key is handed out once.
//
// One goroutine refills the pool, one key at a time, whenever it is below capacity, and then
// sleeps on it. One is enough and more would hurt: a refill is pure CPU, and on a 2-core host a
// second generator would take the other core from the RPC handlers, the operation driver and the
// status sync the keys are for; between bursts one goroutine refills 32 RSA-2048 keys in a few
// seconds.
//
// When the pool is empty (a burst of creates), take generates the key itself, as without a pool,
// but no more at once than there are cores (GOMAXPROCS): every operation worker's four keys at
// once would queue a dozen CPU-bound goroutines in front of everything else. A caller waiting for
// a slot takes a key the filler finished meanwhile instead.
type KeyPool struct {
	bits    int
	keys    chan *rsa.PrivateKey
	slots   chan struct{} // on-demand generations running
	stopped chan struct{} // closed when the filler has returned
	// generate makes a key on demand (tests count it); nil: rsa.GenerateKey.
	generate func(bits int) (*rsa.PrivateKey, error)
}

// NewKeyPool starts filling a pool of size keys of bits bits; it stops when ctx ends.
func NewKeyPool(ctx context.Context, bits, size int) *KeyPool {
	p := &KeyPool{bits: bits, keys: make(chan *rsa.PrivateKey, size),
		slots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0))), stopped: make(chan struct{})}
	go func() {
		defer close(p.stopped)
		for ctx.Err() == nil {
			key, err := rsa.GenerateKey(rand.Reader, bits)
			if err != nil {
				return // the system's randomness failed: Take reports it when it generates
			}
			select {
			case p.keys <- key:
			case <-ctx.Done():
			}
		}
	}()
	return p
}

// Ready is how many keys are waiting.
func (p *KeyPool) Ready() int { return len(p.keys) }

// take returns a pooled key of the wanted size, or generates one.
func (p *KeyPool) take(bits int) (*rsa.PrivateKey, error) {
	if p != nil {
		var pooled <-chan *rsa.PrivateKey // nil (never ready) for another size
		if bits == p.bits {
			pooled = p.keys
			select {
			case key := <-pooled:
				return key, nil
			default:
			}
		}
		select {
		case key := <-pooled:
			return key, nil
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
		}
	}
	generate := func(bits int) (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, bits) }
	if p != nil && p.generate != nil {
		generate = p.generate
	}
	key, err := generate(bits)
	if err != nil {
		return nil, fmt.Errorf("certs: generate RSA-%d key: %w", bits, err)
	}
	return key, nil
}
