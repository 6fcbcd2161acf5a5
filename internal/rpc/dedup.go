package rpc

import (
	"container/list"
	"sync"
)

// dedupCache remembers the last N finished _unique_ids (LRU) and, for calls, their reply.
type dedupCache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[string]*list.Element
}

type dedupEntry struct {
	id    string
	reply *Reply
}

func newDedupCache(max int) *dedupCache {
	return &dedupCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *dedupCache) get(id string) (*Reply, bool) {
	if id == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*dedupEntry).reply, true
}

func (c *dedupCache) put(id string, reply *Reply) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		el.Value.(*dedupEntry).reply = reply
		c.order.MoveToFront(el)
		return
	}
	c.items[id] = c.order.PushFront(&dedupEntry{id: id, reply: reply})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*dedupEntry).id)
	}
}
