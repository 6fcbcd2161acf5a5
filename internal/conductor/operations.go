package conductor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Operations: an RPC handler records what a request intends in the rows the conductor owns (the
// node counts, template, labels and the *_IN_PROGRESS statuses) and hands the cluster to the
// operation driver; the message is then acknowledged. The driver brings the management cluster in
// line with those rows, retrying transient failures with jittered backoff until the operation's
// deadline, and fails the operation with a reason on a permanent error or at the deadline. Because
// the rows are the intent, any partial attempt (a retry, a redelivery, a crash, a restart) is
// resumed by running the driver again: start-up resync enqueues every cluster in progress.
//
// Converging is the watch's business (sync.go): the driver only applies; the status sync moves the
// rows to *_COMPLETE, or to *_FAILED at the same deadline when CAPI never converges.

// Default deadlines of operations other than create (whose deadline is the cluster's own
// create_timeout); see [bridge] update_timeout and delete_timeout.
const (
	DefaultUpdateTimeout = 60 * time.Minute
	DefaultDeleteTimeout = 30 * time.Minute
	// maxMessageHold bounds how long a create request is held unacknowledged while its
	// credentials cannot be issued (they need the request's token): well inside RabbitMQ's
	// consumer_timeout (30 minutes by default).
	maxMessageHold = 10 * time.Minute
	// driveTimeout bounds one run of the driver for a cluster (a hung call is retried).
	driveTimeout = 5 * time.Minute
)

// operations is the driver's state: a rate-limited work queue of cluster uuids (one worker per
// cluster at a time), when each running operation started, and the rollout settings of an upgrade
// waiting for its apply.
type operations struct {
	queue workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	started  map[string]time.Time
	upgrades map[string]*templates.Upgrade
}

func newOperations(base, max time.Duration) *operations {
	limiter := jitteredLimiter{workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)}
	return &operations{
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "magnum-operations"}),
		started:  map[string]time.Time{},
		upgrades: map[string]*templates.Upgrade{},
	}
}

// jitteredLimiter spreads retries of many clusters failing on the same outage (apimachinery's
// wait.Jitter) so they do not hit the recovering service in one burst.
type jitteredLimiter struct {
	workqueue.TypedRateLimiter[string]
}

func (j jitteredLimiter) When(item string) time.Duration {
	return wait.Jitter(j.TypedRateLimiter.When(item), 0.5)
}

// begin records that an operation on the cluster starts now (its deadline counts from here).
func (o *operations) begin(id string, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started[id] = now
}

// startedAt returns when the running operation started; fallback when this process did not see
// it start (a restart: the row's last write).
func (o *operations) startedAt(id string, fallback time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t, ok := o.started[id]; ok {
		return t
	}
	return fallback
}

func (o *operations) end(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.started, id)
	delete(o.upgrades, id)
}

func (o *operations) setUpgrade(id string, u *templates.Upgrade) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.upgrades[id] = u
}

func (o *operations) upgrade(id string) *templates.Upgrade {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.upgrades[id]
}

// enqueue hands a cluster to the driver.
func (c *Conductor) enqueue(id string) { c.ops.queue.Add(id) }

// RunOperations runs the operation driver with workers goroutines until ctx ends.
func (c *Conductor) RunOperations(ctx context.Context, workers int) error {
	go func() {
		<-ctx.Done()
		c.ops.queue.ShutDownWithDrain()
	}()
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.driveNext(ctx) {
			}
		}()
	}
	wg.Wait()
	return nil
}

func (c *Conductor) driveNext(ctx context.Context) bool {
	id, shutdown := c.ops.queue.Get()
	if shutdown {
		return false
	}
	defer c.ops.queue.Done(id)
	if ctx.Err() != nil {
		return true // stopping: the rows keep the intent, the next start resumes it
	}
	runCtx, cancel := context.WithTimeout(ctx, driveTimeout)
	again, err := c.drive(runCtx, id)
	cancel()
	switch {
	case again:
		c.log.Warn("operation: transient failure, will retry", "cluster", id, "error", err,
			"attempt", c.ops.queue.NumRequeues(id)+1)
		c.ops.queue.AddRateLimited(id)
	default:
		c.ops.queue.Forget(id)
	}
	return true
}

// drive applies the operation a cluster's rows record. again is true when a transient failure
// should be retried.
func (c *Conductor) drive(ctx context.Context, id string) (again bool, err error) {
	cl, err := c.store.GetCluster(ctx, id)
	if errors.Is(err, ErrNotFound) {
		c.ops.end(id)
		return false, nil
	}
	if err != nil {
		return true, err // the database is down: the deadline is checked once it answers
	}
	kind := operationOf(cl)
	if kind == "" {
		c.ops.end(id)
		return false, nil // nothing in progress
	}
	switch kind {
	case CreateInProgress:
		err = c.applyCluster(ctx, cl, nil, nil)
	case UpdateInProgress:
		if err = c.applyCluster(ctx, cl, nil, c.ops.upgrade(id)); err == nil {
			c.kube.Kick(c.namespace(cl.ProjectID.Or("")), cl.StackID.Or(""))
		}
	case DeleteInProgress:
		var gone bool
		if gone, err = c.kube.DeleteCluster(ctx, c.namespace(cl.ProjectID.Or("")), cl.StackID.Or("")); err == nil && gone {
			err = c.finishDelete(ctx, cl, nil)
		}
	}
	if err == nil {
		return false, nil
	}
	err = unwrapRetry(err)
	if permanent(err) {
		return false, c.failOperation(ctx, cl, kind, "", err)
	}
	if deadline := c.deadline(cl, kind); c.opts.Now().After(deadline) {
		return false, c.failOperation(ctx, cl, kind,
			fmt.Sprintf("did not finish within its %s", timeoutName(kind, c.timeout(cl, kind))), err)
	}
	return true, err
}

// operationOf names the operation in progress on a cluster ("" when none).
func operationOf(cl *magnum.Cluster) string {
	switch s := string(cl.Status.Or("")); s {
	case CreateInProgress, UpdateInProgress, DeleteInProgress:
		return s
	}
	return ""
}

// timeout is how long an operation of this kind may take on this cluster.
func (c *Conductor) timeout(cl *magnum.Cluster, kind string) time.Duration {
	switch kind {
	case CreateInProgress:
		if m := cl.CreateTimeout.Or(0); m > 0 {
			return time.Duration(m) * time.Minute
		}
		return 60 * time.Minute // Magnum's default create_timeout
	case DeleteInProgress:
		return c.opts.DeleteTimeout
	}
	return c.opts.UpdateTimeout
}

// deadline is when the operation in progress must have finished.
func (c *Conductor) deadline(cl *magnum.Cluster, kind string) time.Time {
	if kind == CreateInProgress {
		return cl.CreatedAt.Or(c.opts.Now()).Add(c.timeout(cl, kind))
	}
	last := cl.UpdatedAt.Or(cl.CreatedAt.Or(c.opts.Now()))
	return c.ops.startedAt(cl.UUID.Or(""), last).Add(c.timeout(cl, kind))
}

func timeoutName(kind string, d time.Duration) string {
	name := map[string]string{CreateInProgress: "create_timeout", UpdateInProgress: "update_timeout", DeleteInProgress: "delete_timeout"}[kind]
	return fmt.Sprintf("%s of %s", name, d)
}

// failOperation ends the operation in progress as *_FAILED with a reason the tenant can act on;
// the node groups the operation was changing fail with it (feeding the API's faults).
func (c *Conductor) failOperation(ctx context.Context, cl *magnum.Cluster, kind, what string, cause error) error {
	id := cl.UUID.Or("")
	failed := map[string]string{CreateInProgress: CreateFailed, UpdateInProgress: UpdateFailed, DeleteInProgress: DeleteFailed}[kind]
	reason := c.reasonFor(id, cause)
	if what != "" {
		reason = operationNoun(kind) + " " + what + ": " + reason
	}
	st := magnum.ClusterStatus(failed)
	if err := c.store.UpdateCluster(ctx, id, ClusterUpdate{Status: &st, StatusReason: &reason,
		OnlyIfStatus: []magnum.ClusterStatus{magnum.ClusterStatus(kind)}}); err != nil && !errors.Is(err, ErrConflict) {
		return rpc.Retry(err)
	}
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return rpc.Retry(err)
	}
	for _, g := range groups {
		gs := string(g.Status.Or(""))
		var to string
		switch {
		case gs == CreateInProgress:
			to = CreateFailed
		case gs == UpdateInProgress:
			to = UpdateFailed
		case gs == DeleteInProgress:
			to = DeleteFailed
		default:
			continue
		}
		fs := magnum.ClusterStatus(to)
		if err := c.store.UpdateNodeGroup(ctx, g.UUID.Or(""), NodeGroupUpdate{ClusterUUID: id, Status: &fs, StatusReason: &reason,
			OnlyIfStatus: []magnum.ClusterStatus{magnum.ClusterStatus(gs)}}); err != nil && !errors.Is(err, ErrConflict) {
			return rpc.Retry(err)
		}
	}
	c.ops.end(id)
	c.log.Warn("operation failed", "cluster", id, "status", failed, "reason", reason)
	return nil
}

func operationNoun(kind string) string {
	return map[string]string{CreateInProgress: "The create", UpdateInProgress: "The update", DeleteInProgress: "The delete"}[kind]
}

func unwrapRetry(err error) error {
	if rpc.IsRetryable(err) {
		if inner := errors.Unwrap(err); inner != nil {
			return inner
		}
	}
	return err
}
