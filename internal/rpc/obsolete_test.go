package rpc

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestObsoleteRepliesExpire(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := newObsoleteReplies(clock)
	assert.False(t, o.has("reply_a"))
	o.add("reply_a")
	assert.True(t, o.has("reply_a"))
	assert.False(t, o.has("reply_b"))

	clock.Step(obsoleteReplyTTL - time.Second)
	assert.True(t, o.has("reply_a"), "forgotten before its TTL")
	o.add("reply_b")
	clock.Step(2 * time.Second)
	assert.False(t, o.has("reply_a"), "still remembered after its TTL")
	assert.True(t, o.has("reply_b"))

	o.add("reply_a") // missing again: remembered anew
	clock.Step(obsoleteReplyTTL - time.Second)
	assert.True(t, o.has("reply_a"))
	assert.False(t, o.has("reply_b"))
}

func TestObsoleteRepliesBounded(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	o := newObsoleteReplies(clock)
	for i := 0; i <= obsoleteReplySize; i++ {
		o.add(fmt.Sprintf("reply_%d", i))
	}
	assert.False(t, o.has("reply_0"), "the oldest entry is dropped beyond the bound")
	assert.True(t, o.has("reply_1"))
	assert.True(t, o.has(fmt.Sprintf("reply_%d", obsoleteReplySize)))
}
