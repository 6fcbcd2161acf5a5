package rpc

import (
	"sync"
	"time"
)

// scheduler runs tasks in arrival order per key and in parallel across keys. A key's chain
// holds all its tasks; only the head is ever runnable, running or waiting for a retry.
type scheduler struct {
	mu       sync.Mutex
	cond     *sync.Cond
	runq     []*task
	chains   map[string][]*task
	waiting  map[*task]struct{}
	stopping bool
}

func newScheduler() *scheduler {
	s := &scheduler{chains: map[string][]*task{}, waiting: map[*task]struct{}{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// submit queues t; false when shutting down.
func (s *scheduler) submit(t *task) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	if t.key == "" {
		s.runq = append(s.runq, t)
	} else {
		chain := s.chains[t.key]
		s.chains[t.key] = append(chain, t)
		if len(chain) > 0 {
			return true // runs after its predecessors
		}
		s.runq = append(s.runq, t)
	}
	s.cond.Signal()
	return true
}

// next blocks until a task is runnable; nil when stopping.
func (s *scheduler) next() *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.runq) == 0 && !s.stopping {
		s.cond.Wait()
	}
	if s.stopping {
		return nil
	}
	t := s.runq[0]
	s.runq[0] = nil
	s.runq = s.runq[1:]
	return t
}

// done releases t's key: its successor becomes runnable.
func (s *scheduler) done(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.key == "" {
		return
	}
	chain := s.chains[t.key]
	if len(chain) > 0 && chain[0] == t {
		chain[0] = nil
		chain = chain[1:]
	}
	if len(chain) == 0 {
		delete(s.chains, t.key)
		return
	}
	s.chains[t.key] = chain
	if !s.stopping {
		s.runq = append(s.runq, chain[0])
		s.cond.Signal()
	}
}

// retryLater keeps t at the head of its chain and makes it runnable again after delay.
func (s *scheduler) retryLater(t *task, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		t.requeue()
		s.dropLocked(t)
		return
	}
	s.waiting[t] = struct{}{}
	t.timer = time.AfterFunc(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.waiting[t]; !ok {
			return // collected by stop()
		}
		delete(s.waiting, t)
		s.runq = append(s.runq, t)
		s.cond.Signal()
	})
}

func (s *scheduler) dropLocked(t *task) {
	if t.key == "" {
		return
	}
	chain := s.chains[t.key]
	for i, c := range chain {
		if c == t {
			chain = append(chain[:i:i], chain[i+1:]...)
			break
		}
	}
	if len(chain) == 0 {
		delete(s.chains, t.key)
	} else {
		s.chains[t.key] = chain
	}
}

// stop makes workers exit after their current task and returns every task that has not
// started (queued, waiting behind its key, or waiting for a retry).
func (s *scheduler) stop() []*task {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	s.cond.Broadcast()
	seen := map[*task]bool{}
	var out []*task
	add := func(t *task) {
		if t != nil && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, t := range s.runq {
		add(t)
	}
	s.runq = nil
	for t := range s.waiting {
		t.timer.Stop()
		add(t)
	}
	s.waiting = map[*task]struct{}{}
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
