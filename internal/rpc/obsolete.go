package rpc

import (
	"sync"
	"time"
)

// obsoleteReplies remembers reply queues found missing, so that later replies to them are
// tried once instead of blocking a worker for the whole retry window (oslo keeps the same list).
type obsoleteReplies struct {
	mu    sync.Mutex
	items map[string]time.Time
}

func newObsoleteReplies() *obsoleteReplies { return &obsoleteReplies{items: map[string]time.Time{}} }

const obsoleteReplyTTL = 10 * time.Minute

func (o *obsoleteReplies) add(q string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for k, at := range o.items {
		if now.Sub(at) > obsoleteReplyTTL {
			delete(o.items, k)
		}
	}
	if len(o.items) < 1024 {
		o.items[q] = now
	}
}

func (o *obsoleteReplies) has(q string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.items[q]
	return ok && time.Since(at) < obsoleteReplyTTL
}
