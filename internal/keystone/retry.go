package keystone

import (
	"errors"
	"fmt"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"
)

// RetryPolicy paces the retries of a transient Keystone answer (ErrUnassignedRole): waits doubling
// from Initial up to Max, for at most Budget in all and never past the context's deadline, so a
// create stays within the deadline of the request that asked for it.
type RetryPolicy = backoff.Policy

// DefaultRetryPolicy is what a Client uses without WithRetryPolicy.
var DefaultRetryPolicy = RetryPolicy{Initial: 250 * time.Millisecond, Max: 4 * time.Second, Budget: 90 * time.Second}

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option { return func(o *clientOptions) { o.retry = &p } }

// gaveUp says in err how long the answer persisted.
func gaveUp(attempts *backoff.Attempts, err error) error {
	if attempts.Count() < 2 {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		copied := *e
		copied.Message += fmt.Sprintf(" (answered %d times over %s)", attempts.Count(), attempts.Elapsed().Round(time.Millisecond))
		return &copied
	}
	return err
}
