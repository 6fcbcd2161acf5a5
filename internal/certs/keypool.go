package certs

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
)

// KeyPool keeps RSA keys generated ahead of demand, so that a cluster create does not wait for its
// four keys (the largest part of its cost before the first apply). One goroutine refills the pool
// whenever it is below capacity and then sleeps on it; a key is handed out once. When the pool is
// empty (a burst of creates), Take generates the key itself, as without a pool.
type KeyPool struct {
	bits    int
	keys    chan *rsa.PrivateKey
	stopped chan struct{} // closed when the filler has returned
}

// NewKeyPool starts filling a pool of size keys of bits bits; it stops when ctx ends.
func NewKeyPool(ctx context.Context, bits, size int) *KeyPool {
	p := &KeyPool{bits: bits, keys: make(chan *rsa.PrivateKey, size), stopped: make(chan struct{})}
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
	if p != nil && bits == p.bits {
		select {
		case key := <-p.keys:
			return key, nil
		default:
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, fmt.Errorf("certs: generate RSA-%d key: %w", bits, err)
	}
	return key, nil
}
