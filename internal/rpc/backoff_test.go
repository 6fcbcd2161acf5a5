package rpc

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestBackoffDelays checks every step against the equal-jitter window [d/2, d] of the
// doubling delay d, for ordinary and degenerate settings.
func TestBackoffDelays(t *testing.T) {
	cases := []struct {
		base, max time.Duration
		// d is the un-jittered delay of each step
		d []time.Duration
	}{
		{100 * time.Millisecond, 2 * time.Second, []time.Duration{
			100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
			1600 * time.Millisecond, 2 * time.Second, 2 * time.Second, 2 * time.Second,
		}},
		{50 * time.Millisecond, 50 * time.Millisecond, []time.Duration{
			50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
		}},
		// No base: 100 ms; a max below the base is raised to it.
		{0, 0, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}},
		{time.Second, time.Millisecond, []time.Duration{time.Second, time.Second}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s..%s", c.base, c.max), func(t *testing.T) {
			b := newBackoff(c.base, c.max)
			for i, d := range c.d {
				got := b.Step()
				assert.GreaterOrEqual(t, got, d/2, "step %d", i)
				assert.LessOrEqual(t, got, d, "step %d", i)
			}
		})
	}
}

// TestBackoffIsJittered: delays of the same step differ between clients, so that they do
// not reconnect in lockstep.
func TestBackoffIsJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := 0; i < 20; i++ {
		b := newBackoff(time.Second, time.Minute)
		seen[b.Step()] = true
	}
	assert.Greater(t, len(seen), 1, "20 first delays were all the same")
}
