// Package backoff is the retry policy of the bridge's clients (Keystone's transient refusals, the
// database's transient errors and its first connection): waits that double from Initial up to Max, bounded by a number of
// attempts, a time budget and the context's deadline. The waits come from
// k8s.io/apimachinery's wait.Backoff.
package backoff

import (
	"context"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Policy paces the retries of one operation.
type Policy struct {
	// Initial is the first wait; each further one doubles. Zero or negative: no retries.
	Initial time.Duration
	// Max caps each wait; 0: no cap.
	Max time.Duration
	// Budget bounds the whole operation: no retry starts whose wait would end more than Budget
	// after the first attempt began. 0: no budget.
	Budget time.Duration
	// MaxAttempts counts the first attempt too; 0: no limit.
	MaxAttempts int
	// Fixed keeps every wait at Initial (oslo.db's connection retry_interval does not grow).
	Fixed bool
}

// uncapped stands for "no cap": waits stop doubling there instead of overflowing.
const uncapped = time.Duration(math.MaxInt64 / 4)

// backoff is the policy's sequence of waits.
func (p Policy) backoff() wait.Backoff {
	b := wait.Backoff{Duration: p.Initial, Factor: 2, Cap: p.Max, Steps: math.MaxInt}
	if p.Fixed {
		b.Factor = 1
	}
	if b.Cap <= 0 {
		b.Cap = uncapped
	}
	return b
}

// Attempts is one operation's progress through its Policy. It is not safe for concurrent use.
type Attempts struct {
	policy   Policy
	waits    wait.Backoff
	started  time.Time
	deadline time.Time // zero: none
	count    int
}

// Start begins an operation: its first attempt is under way. The context's deadline, when earlier
// than the budget's end, bounds the retries too, so an operation ends within the request that
// asked for it instead of failing on a wait it cannot finish.
func (p Policy) Start(ctx context.Context) *Attempts {
	now := time.Now()
	a := &Attempts{policy: p, waits: p.backoff(), started: now, count: 1}
	if p.Budget > 0 {
		a.deadline = now.Add(p.Budget)
	}
	if d, ok := ctx.Deadline(); ok && (a.deadline.IsZero() || d.Before(a.deadline)) {
		a.deadline = d
	}
	return a
}

// Wait sleeps before the next attempt and reports true; it reports false at once when the
// attempts are used up, the context has ended, or the next attempt could not start before the
// budget or the context's deadline ends, and false when the context ends while waiting.
func (a *Attempts) Wait(ctx context.Context) bool {
	if a.policy.MaxAttempts > 0 && a.count >= a.policy.MaxAttempts || ctx.Err() != nil {
		return false
	}
	d := a.waits.Step()
	if d <= 0 || !a.deadline.IsZero() && time.Now().Add(d).After(a.deadline) {
		return false
	}
	if !Sleep(ctx, d) {
		return false
	}
	a.count++
	return true
}

// Sleep waits for d and reports true, or reports false as soon as the context ends.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Count is the number of attempts begun so far, the first included.
func (a *Attempts) Count() int { return a.count }

// Elapsed is the time since the first attempt began.
func (a *Attempts) Elapsed() time.Duration { return time.Since(a.started) }

// Do runs op until it succeeds, fails with an error retryable does not accept, or the policy
// gives up; it returns op's last error, never the context's own. attempt counts from 1.
func (p Policy) Do(ctx context.Context, retryable func(error) bool, op func(attempt int) error) error {
	a := p.Start(ctx)
	for {
		err := op(a.Count())
		if err == nil || !retryable(err) || !a.Wait(ctx) {
			return err
		}
	}
}
