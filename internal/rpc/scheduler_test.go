package rpc

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// item is what the scheduler tests schedule: a name to follow it and the key it serialises on.
type item struct{ name, key string }

func newItemScheduler() *scheduler[*item] {
	return newScheduler(func(it *item) string { return it.key })
}

// tryNext is next with a deadline: ok is false when nothing became runnable within wait.
func tryNext(t *testing.T, s *scheduler[*item], wait time.Duration) (*item, bool) {
	t.Helper()
	type result struct {
		it *item
		ok bool
	}
	got := make(chan result, 1)
	go func() {
		it, ok := s.next()
		got <- result{it, ok}
	}()
	select {
	case r := <-got:
		return r.it, r.ok
	case <-time.After(wait):
		// Unblock the goroutine so it does not outlive the test; whatever it takes is lost.
		t.Cleanup(func() { s.stop() })
		return nil, false
	}
}

func mustNext(t *testing.T, s *scheduler[*item]) *item {
	t.Helper()
	it, ok := tryNext(t, s, 2*time.Second)
	require.True(t, ok, "nothing runnable")
	return it
}

func names(items []*item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.name)
	}
	return out
}

func TestSchedulerRunnableOrder(t *testing.T) {
	// Each case submits items, then takes runnable ones, calling done on the names listed
	// in finish after each take; want is the order items come out.
	cases := []struct {
		name   string
		submit []item
		finish map[string]bool // done right after being taken
		want   []string
	}{
		{
			name:   "one key runs in arrival order, one at a time",
			submit: []item{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}},
			finish: map[string]bool{"a1": true, "a2": true, "a3": true},
			want:   []string{"a1", "a2", "a3"},
		},
		{
			name:   "other keys do not wait for a busy key",
			submit: []item{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"c1", "c"}},
			finish: map[string]bool{"b1": true, "c1": true},
			want:   []string{"a1", "b1", "c1"}, // a2 waits for a1, which never finishes
		},
		{
			name:   "empty keys are independent",
			submit: []item{{"x1", ""}, {"x2", ""}, {"x3", ""}},
			finish: map[string]bool{},
			want:   []string{"x1", "x2", "x3"},
		},
		{
			name:   "a finished key lets its successor in behind the queued others",
			submit: []item{{"a1", "a"}, {"b1", "b"}, {"a2", "a"}, {"b2", "b"}},
			finish: map[string]bool{"a1": true, "b1": true, "a2": true, "b2": true},
			want:   []string{"a1", "b1", "a2", "b2"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newItemScheduler()
			defer s.stop()
			for i := range c.submit {
				require.True(t, s.submit(&c.submit[i]))
			}
			var got []string
			for range c.want {
				it := mustNext(t, s)
				got = append(got, it.name)
				if c.finish[it.name] {
					s.done(it)
				}
			}
			assert.Equal(t, c.want, got)
			_, more := tryNext(t, s, 50*time.Millisecond)
			assert.False(t, more, "an item became runnable that should still wait")
		})
	}
}

// TestSchedulerOrderingUnderConcurrency runs many items on several workers and checks that
// items of one key never overlap and run in arrival order.
func TestSchedulerOrderingUnderConcurrency(t *testing.T) {
	const keys, perKey, workers = 5, 40, 4
	s := newItemScheduler()
	t.Cleanup(func() { s.stop() })
	var (
		mu      sync.Mutex
		running = map[string]int{}
		order   = map[string][]string{}
		overlap []string
	)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				it, ok := s.next()
				if !ok {
					return
				}
				mu.Lock()
				running[it.key]++
				if running[it.key] > 1 {
					overlap = append(overlap, it.name)
				}
				order[it.key] = append(order[it.key], it.name)
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				mu.Lock()
				running[it.key]--
				mu.Unlock()
				s.done(it)
			}
		}()
	}
	want := map[string][]string{}
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("k%d", k)
			it := &item{name: fmt.Sprintf("%s-%d", key, i), key: key}
			want[key] = append(want[key], it.name)
			require.True(t, s.submit(it))
		}
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range order {
			n += len(o)
		}
		return n == keys*perKey
	}, 10*time.Second, 5*time.Millisecond)
	s.stop()
	wg.Wait()
	assert.Empty(t, overlap, "items of one key ran at the same time")
	assert.Equal(t, want, order)
}

// TestSchedulerKeysRunInParallel holds one key's item until another key's item has started:
// a scheduler that serialised across keys would never start the second one.
func TestSchedulerKeysRunInParallel(t *testing.T) {
	s := newItemScheduler()
	defer s.stop()
	bStarted := make(chan struct{})
	results := make(chan string, 2)
	for w := 0; w < 2; w++ {
		go func() {
			it, ok := s.next()
			if !ok {
				return
			}
			if it.key == "a" {
				select {
				case <-bStarted:
					results <- "a saw b running"
				case <-time.After(2 * time.Second):
					results <- "a ran alone"
				}
			} else {
				close(bStarted)
				results <- "b ran"
			}
			s.done(it)
		}()
	}
	require.True(t, s.submit(&item{"a1", "a"}))
	require.True(t, s.submit(&item{"b1", "b"}))
	got := []string{<-results, <-results}
	assert.ElementsMatch(t, []string{"a saw b running", "b ran"}, got)
}

func TestSchedulerRetryKeepsSuccessorsWaiting(t *testing.T) {
	s := newItemScheduler()
	defer s.stop()
	a1, a2, b1 := &item{"a1", "a"}, &item{"a2", "a"}, &item{"b1", "b"}
	require.True(t, s.submit(a1))
	require.True(t, s.submit(a2))
	require.Same(t, a1, mustNext(t, s))
	start := time.Now()
	require.True(t, s.retryLater(a1, 100*time.Millisecond))
	require.True(t, s.submit(b1))
	assert.Same(t, b1, mustNext(t, s), "another key is not held up by a retry")
	assert.Same(t, a1, mustNext(t, s), "the retried item comes back before its successor")
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "retried before its delay")
	s.done(a1)
	assert.Same(t, a2, mustNext(t, s))
}

func TestSchedulerStopHandsBackWhatHasNotStarted(t *testing.T) {
	s := newItemScheduler()
	a1, a2, b1, c1, x1 := &item{"a1", "a"}, &item{"a2", "a"}, &item{"b1", "b"}, &item{"c1", "c"}, &item{"x1", ""}
	require.True(t, s.submit(a1))
	require.True(t, s.submit(c1))
	require.Same(t, a1, mustNext(t, s)) // a1 is running
	require.Same(t, c1, mustNext(t, s))
	require.True(t, s.retryLater(c1, time.Hour)) // c1 waits for a retry
	require.True(t, s.submit(a2))                // waits behind a1
	require.True(t, s.submit(b1))                // runnable
	require.True(t, s.submit(x1))                // runnable, no key

	assert.ElementsMatch(t, []string{"a2", "b1", "c1", "x1"}, names(s.stop()))

	_, ok := s.next()
	assert.False(t, ok, "workers must exit once stopped")
	assert.False(t, s.submit(&item{"late", "d"}), "nothing is accepted after stop")
	assert.False(t, s.retryLater(a1, time.Millisecond), "a retry after stop goes back to the caller")
	s.done(a1)
	assert.Empty(t, s.chains, "stopped scheduler still holds chains")
	assert.Empty(t, s.runq)
}
