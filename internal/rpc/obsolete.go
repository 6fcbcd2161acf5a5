package rpc

import (
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
)

// obsoleteReplies remembers reply queues found missing, so that later replies to them are
// tried once instead of blocking a worker for the whole retry window (oslo keeps the same
// list). An entry expires after obsoleteReplyTTL, since a client may come back and declare
// its queue again; the size bound keeps a flood of vanished clients from growing it.
type obsoleteReplies struct {
	items *cache.LRUExpireCache
}

const (
	obsoleteReplyTTL  = 10 * time.Minute
	obsoleteReplySize = 1024
)

// newObsoleteReplies uses clock for expiry (nil: the real time).
func newObsoleteReplies(clock cache.Clock) *obsoleteReplies {
	if clock == nil {
		return &obsoleteReplies{items: cache.NewLRUExpireCache(obsoleteReplySize)}
	}
	return &obsoleteReplies{items: cache.NewLRUExpireCacheWithClock(obsoleteReplySize, clock)}
}

func (o *obsoleteReplies) add(q string) { o.items.Add(q, struct{}{}, obsoleteReplyTTL) }

func (o *obsoleteReplies) has(q string) bool {
	_, ok := o.items.Get(q)
	return ok
}
