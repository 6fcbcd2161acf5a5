package rpc

import (
	"k8s.io/utils/lru"
)

// dedupCache remembers the last N finished _unique_ids and, for calls, their reply. The broker
// redelivers whatever was not acknowledged when a connection dropped, and oslo clients may
// resend; remembering recent ids lets such copies be answered without running the handler
// twice. Least recently seen ids are forgotten first.
type dedupCache struct {
	lru *lru.Cache
}

func newDedupCache(size int) *dedupCache {
	return &dedupCache{lru: lru.New(size)}
}

// get reports whether id finished recently and, for a call, its reply (nil for a cast).
func (c *dedupCache) get(id string) (*Reply, bool) {
	if id == "" {
		return nil, false // an id-less message cannot be recognised again
	}
	v, ok := c.lru.Get(id)
	if !ok {
		return nil, false
	}
	return v.(*Reply), true
}

// put records that id finished, with the reply a call got (nil for a cast).
func (c *dedupCache) put(id string, reply *Reply) {
	if id == "" {
		return
	}
	c.lru.Add(id, reply)
}
