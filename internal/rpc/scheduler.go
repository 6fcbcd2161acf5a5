package rpc

import (
	"sync"
	"time"
)

// scheduler runs items in arrival order per key and in parallel across keys: two messages
// about the same cluster must not race, while different clusters should not wait for each
// other. A key's chain holds all its items; only the head is ever runnable, running or waiting
// for a retry. Items with the empty key are independent of everything.
//
// It knows nothing about AMQP, so that the ordering rules can be tested on their own.
type scheduler[T comparable] struct {
	keyOf    func(T) string
	mu       sync.Mutex
	cond     *sync.Cond
	runq     []T
	chains   map[string][]T
	waiting  map[T]*time.Timer // items waiting for a retry, with their timer
	stopping bool
}

func newScheduler[T comparable](keyOf func(T) string) *scheduler[T] {
	s := &scheduler[T]{keyOf: keyOf, chains: map[string][]T{}, waiting: map[T]*time.Timer{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// submit queues t; false when shutting down.
func (s *scheduler[T]) submit(t T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	if key := s.keyOf(t); key == "" {
		s.runq = append(s.runq, t)
	} else {
		chain := s.chains[key]
		s.chains[key] = append(chain, t)
		if len(chain) > 0 {
			return true // runs after its predecessors
		}
		s.runq = append(s.runq, t)
	}
	s.cond.Signal()
	return true
}

// next blocks until an item is runnable; false when stopping.
func (s *scheduler[T]) next() (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.runq) == 0 && !s.stopping {
		s.cond.Wait()
	}
	var zero T
	if s.stopping {
		return zero, false
	}
	t := s.runq[0]
	s.runq[0] = zero // let the collector have it
	s.runq = s.runq[1:]
	return t, true
}

// done releases t's key: its successor becomes runnable.
func (s *scheduler[T]) done(t T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.keyOf(t)
	if key == "" {
		return
	}
	chain := s.chains[key]
	if len(chain) > 0 && chain[0] == t {
		var zero T
		chain[0] = zero
		chain = chain[1:]
	}
	if len(chain) == 0 {
		delete(s.chains, key)
		return
	}
	s.chains[key] = chain
	if !s.stopping {
		s.runq = append(s.runq, chain[0])
		s.cond.Signal()
	}
}

// retryLater keeps t at the head of its chain, so its successors keep waiting, and makes it
// runnable again after delay. When the scheduler is stopping it returns false: t has left the
// scheduler and the caller must hand it back (to the broker).
func (s *scheduler[T]) retryLater(t T, delay time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		s.dropLocked(t)
		return false
	}
	s.waiting[t] = time.AfterFunc(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.waiting[t]; !ok {
			return // collected by stop()
		}
		delete(s.waiting, t)
		s.runq = append(s.runq, t)
		s.cond.Signal()
	})
	return true
}

func (s *scheduler[T]) dropLocked(t T) {
	key := s.keyOf(t)
	if key == "" {
		return
	}
	chain := s.chains[key]
	for i, c := range chain {
		if c == t {
			chain = append(chain[:i:i], chain[i+1:]...)
			break
		}
	}
	if len(chain) == 0 {
		delete(s.chains, key)
	} else {
		s.chains[key] = chain
	}
}

// stop makes workers exit after their current item and returns every item that has not
// started (queued, waiting behind its key, or waiting for a retry), so that it can be handed
// back instead of lost.
func (s *scheduler[T]) stop() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	s.cond.Broadcast()
	seen := map[T]bool{}
	var out []T
	add := func(t T) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, t := range s.runq {
		add(t)
	}
	s.runq = nil
	for t, timer := range s.waiting {
		timer.Stop()
		add(t)
	}
	s.waiting = map[T]*time.Timer{}
	for key, chain := range s.chains {
		// The head may be running (not in runq/waiting): keep it, hand back the rest.
		head := chain[0]
		for _, t := range chain[1:] {
			add(t)
		}
		if seen[head] {
			delete(s.chains, key)
		} else {
			s.chains[key] = chain[:1]
		}
	}
	return out
}
