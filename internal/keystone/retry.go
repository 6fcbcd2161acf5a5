package keystone

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RetryPolicy paces the retries of a transient Keystone answer (ErrUnassignedRole): waits doubling
// from Initial up to Max, for at most Budget in all and never past the context's deadline, so a
// create stays within the deadline of the request that asked for it.
type RetryPolicy struct {
	Initial, Max, Budget time.Duration
}

// DefaultRetryPolicy is what a Client uses without WithRetryPolicy.
var DefaultRetryPolicy = RetryPolicy{Initial: 250 * time.Millisecond, Max: 4 * time.Second, Budget: 90 * time.Second}

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option { return func(o *clientOptions) { o.retry = &p } }

// retrying is one operation's progress through its RetryPolicy.
type retrying struct {
	policy   RetryPolicy
	started  time.Time
	deadline time.Time
	delay    time.Duration
	attempts int
}

func (p RetryPolicy) start(ctx context.Context) *retrying {
	now := time.Now()
	r := &retrying{policy: p, started: now, deadline: now.Add(p.Budget), delay: p.Initial, attempts: 1}
	if d, ok := ctx.Deadline(); ok && d.Before(r.deadline) {
		r.deadline = d
	}
	return r
}

// wait sleeps before the next attempt and reports true, or reports false at once when that attempt
// could not start before the budget or the context's deadline ends (or the context ends meanwhile).
func (r *retrying) wait(ctx context.Context) bool {
	if r.delay <= 0 || time.Now().Add(r.delay).After(r.deadline) {
		return false
	}
	t := time.NewTimer(r.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	r.attempts++
	r.delay = min(2*r.delay, r.policy.Max)
	return true
}

// gaveUp says in err how long the answer persisted.
func (r *retrying) gaveUp(err error) error {
	if r.attempts < 2 {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		copied := *e
		copied.Message += fmt.Sprintf(" (answered %d times over %s)", r.attempts, time.Since(r.started).Round(time.Millisecond))
		return &copied
	}
	return err
}
