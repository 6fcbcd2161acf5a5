package conductor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// Across replicas an operation has one driver: the replica holding the cluster's claim (Claims),
// which it keeps while the operation is in progress. The leader resumes, every ResumeEvery
// interval, operations nobody holds — a replica died, or stopped, with the operation unfinished.
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
	// moves are the clusters whose update moves them to this bridge's rendering.
	moves map[string]bool
	// serverGroups: the groups a create's handler made as the requesting user (ensureCreateCredentials),
	// so that its driver does not make them again as the cluster's credential.
	serverGroups map[string][]templates.ServerGroup
	// held: the clusters this replica holds the claim of, with the operation it claimed them for.
	held map[string]magnum.ClusterStatus
	// intent: a handler of this replica recorded the operation (it waits for a claim another
	// replica holds rather than leaving the operation to it: the handler may know more, such as
	// an upgrade's rollout settings).
	intent map[string]bool
	// busy: queued, being driven or waiting for a retry in this replica.
	busy map[string]bool
	// deleted: the clusters whose delete this replica finished, watched for a while (afterDelete).
	deleted map[string]deletedCluster
}

// deletedCluster is where a deleted cluster's CAPI Cluster was, and until when to look for it.
type deletedCluster struct {
	namespace, name string
	until           time.Time
}

func newOperations(base, max time.Duration) *operations {
	limiter := jitteredLimiter{workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)}
	return &operations{
		queue:        workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "magnum-operations"}),
		started:      map[string]time.Time{},
		upgrades:     map[string]*templates.Upgrade{},
		moves:        map[string]bool{},
		serverGroups: map[string][]templates.ServerGroup{},
		held:         map[string]magnum.ClusterStatus{},
		intent:       map[string]bool{},
		busy:         map[string]bool{},
		deleted:      map[string]deletedCluster{},
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
	delete(o.moves, id)
	delete(o.intent, id)
	delete(o.serverGroups, id)
}

// watchDeleted records a delete this replica finished; deletedWatch is the entry while it lasts.
func (o *operations) watchDeleted(id string, d deletedCluster) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deleted[id] = d
}

func (o *operations) deletedWatch(id string, now time.Time) (deletedCluster, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, ok := o.deleted[id]
	if ok && !now.Before(d.until) {
		delete(o.deleted, id)
		return d, false
	}
	return d, ok
}

func (o *operations) madeServerGroups(id string, groups []templates.ServerGroup) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.serverGroups[id] = slices.Clone(groups)
}

// serverGroupsMade reports whether exactly these groups were made for the cluster's operation.
func (o *operations) serverGroupsMade(id string, groups []templates.ServerGroup) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	made, ok := o.serverGroups[id]
	return ok && slices.Equal(made, groups)
}

// add queues a cluster; intended marks an operation this replica's handler recorded.
func (o *operations) add(id string, intended bool) {
	o.mu.Lock()
	o.busy[id] = true
	if intended {
		o.intent[id] = true
	}
	o.mu.Unlock()
	o.queue.Add(id)
}

// idle: the driver is done with the cluster until something queues it again.
func (o *operations) idle(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.busy, id)
}

func (o *operations) isBusy(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.busy[id]
}

func (o *operations) intended(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.intent[id]
}

func (o *operations) hold(id string, kind magnum.ClusterStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held[id] = kind
	delete(o.intent, id) // this replica drives it now
}

// unhold forgets a claim; it reports whether this replica held it.
func (o *operations) unhold(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.held[id]
	delete(o.held, id)
	return ok
}

func (o *operations) holds(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.held[id]
	return ok
}

func (o *operations) holding() map[string]magnum.ClusterStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.held)
}

func (o *operations) setUpgrade(id string, u *templates.Upgrade) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.upgrades[id] = u
}

func (o *operations) setMove(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.moves[id] = true
}

func (o *operations) moving(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.moves[id]
}

func (o *operations) upgrade(id string) *templates.Upgrade {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.upgrades[id]
}

// enqueue hands a cluster whose operation a handler of this replica recorded to the driver.
func (c *Conductor) enqueue(id string) { c.ops.add(id, true) }

// resume hands a cluster to the driver to resume whatever its rows record, unless a replica holds
// its claim (and so drives it: this one too, when the claim is its own).
func (c *Conductor) resume(id string) {
	if c.opts.Claims != nil && c.ops.holds(id) {
		return
	}
	c.ops.add(id, false)
}

// errClaimHeld: another replica holds the cluster's claim; this replica's handler recorded the
// operation, so it looks again shortly (the holder lets go once it is not busy with it).
var errClaimHeld = errors.New("another replica drives this cluster's operation")

// claim takes or renews the cluster's claim for an operation of this kind.
func (c *Conductor) claim(ctx context.Context, id string, kind magnum.ClusterStatus) (bool, error) {
	if c.opts.Claims == nil {
		return true, nil
	}
	ok, err := c.opts.Claims.Claim(ctx, id)
	if err != nil || !ok {
		return false, err
	}
	c.ops.hold(id, kind)
	return true, nil
}

// release gives up the cluster's claim if this replica holds it; a failure only delays another
// replica until the claim expires.
func (c *Conductor) release(ctx context.Context, id string) {
	if c.opts.Claims == nil || !c.ops.unhold(id) {
		return
	}
	if err := c.opts.Claims.Release(ctx, id); err != nil {
		c.log.WarnContext(ctx, "operation claim: release failed; it expires instead", "cluster", id, "error", err)
	}
}

// RunClaims keeps this replica's claims until ctx ends: every ClaimRenew it renews the claims of
// operations still in progress, releases those whose operation ended (or changed while this
// replica is not busy with it, so that the replica whose handler recorded the new one takes it),
// and looks again at a delete it holds (the driver finishes it once CAPI's Cluster is gone). On
// the way out it releases them all, so another replica need not wait for them to expire.
func (c *Conductor) RunClaims(ctx context.Context) error {
	if c.opts.Claims == nil {
		return nil
	}
	t := time.NewTicker(c.opts.ClaimRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			for id := range c.ops.holding() {
				c.release(stop, id)
			}
			cancel()
			return nil
		case <-t.C:
			c.renewClaims(ctx)
		}
	}
}

func (c *Conductor) renewClaims(ctx context.Context) {
	for id, kind := range c.ops.holding() {
		cl, err := c.store.GetCluster(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			c.release(ctx, id)
			continue
		case err != nil:
			// The database is unreachable: keep the claim (nobody else can do better now).
		default:
			now := operationOf(cl)
			busy := c.ops.isBusy(id)
			if now == "" || (now != kind && !busy) {
				c.release(ctx, id)
				continue
			}
			if now == magnum.StatusDeleteInProgress && !busy {
				c.ops.add(id, false)
			}
		}
		if ok, err := c.opts.Claims.Claim(ctx, id); err == nil && !ok {
			// It expired and another replica took it over (this one was too slow to renew):
			// whatever this replica still has in flight is an idempotent step.
			c.ops.unhold(id)
			c.log.WarnContext(ctx, "operation claim: taken over by another replica", "cluster", id)
		}
	}
}

// ResumeEvery runs the leader's share of operations until ctx ends (leadership lost): every
// interval it hands every cluster in progress to the driver, which drives those whose claim
// nobody holds (their replica died before finishing), and sweeps claims left by dead replicas.
func (c *Conductor) ResumeEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Resync(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "resume operations in progress", "error", err)
			}
		}
	}
}

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
	case errors.Is(err, errClaimHeld):
		c.ops.queue.Forget(id)
		c.ops.queue.AddAfter(id, c.opts.ClaimRecheck)
	case again:
		c.log.WarnContext(ctx, "operation: transient failure, will retry", "cluster", id, "error", err,
			"attempt", c.ops.queue.NumRequeues(id)+1)
		c.ops.queue.AddRateLimited(id)
	default:
		c.ops.queue.Forget(id)
		c.ops.idle(id)
	}
	return true
}

// A replica of a release without operation claims (before v0.1.0), running next to this one in a
// rolling upgrade, may still be applying the create of a cluster whose delete this replica has
// just finished: its apply re-creates the CAPI Cluster after the row is gone, and nothing would
// ever delete it. So this replica looks again for afterDeleteWatch after each delete it finished,
// and deletes such a Cluster (with its Secrets and add-ons) again.
const (
	afterDeleteWatch = 3 * time.Minute
	afterDeleteCheck = 15 * time.Second
)

func (c *Conductor) afterDelete(id, namespace, name string) {
	c.ops.watchDeleted(id, deletedCluster{namespace: namespace, name: name, until: c.opts.Now().Add(afterDeleteWatch)})
	c.ops.queue.AddAfter(id, afterDeleteCheck)
}

// deleteAgainIfReapplied runs for a cluster without a row: if this replica deleted it lately and
// its CAPI Cluster is back, it is deleted again; the watch goes on until afterDeleteWatch.
// A failure is logged and tried again at the next check.
func (c *Conductor) deleteAgainIfReapplied(ctx context.Context, id string) {
	d, watching := c.ops.deletedWatch(id, c.opts.Now())
	if !watching {
		return
	}
	defer c.ops.queue.AddAfter(id, afterDeleteCheck)
	live, found, err := c.kube.GetCluster(ctx, d.namespace, d.name)
	if err != nil || !found || live.DeletionTimestamp != nil || live.Labels[templates.LabelClusterUUID] != id {
		return
	}
	c.log.WarnContext(ctx, "a deleted cluster's CAPI Cluster is back (a create of an older replica applied after the delete): deleting it again",
		"cluster", id, "capi", d.namespace+"/"+d.name)
	_, err = c.kube.DeleteCluster(ctx, d.namespace, d.name)
	err = errors.Join(err, c.kube.DeleteAddons(ctx, d.namespace, id), c.deleteAutoscaler(ctx, d.namespace, id),
		c.kube.DeleteClusterSecrets(ctx, d.namespace, id))
	if err != nil {
		c.log.WarnContext(ctx, "deleting a deleted cluster's CAPI Cluster again failed; tried at the next check", "cluster", id, "error", err)
	}
}

// drive applies the operation a cluster's rows record. again is true when a transient failure
// should be retried.
func (c *Conductor) drive(ctx context.Context, id string) (again bool, err error) {
	cl, err := c.store.GetCluster(ctx, id)
	if errors.Is(err, ErrNotFound) {
		c.ops.end(id)
		c.release(ctx, id)
		c.deleteAgainIfReapplied(ctx, id)
		return false, nil
	}
	if err != nil {
		return true, err // the database is down: the deadline is checked once it answers
	}
	kind := operationOf(cl)
	if kind == "" {
		c.ops.end(id)
		c.release(ctx, id)
		return false, nil // nothing in progress
	}
	d, why, err := c.driverOf(ctx, cl)
	if err != nil {
		return true, err // the management cluster cannot say whether the cluster was adopted
	}
	if d != templates.DriverBridge {
		c.noteForeign(ctx, cl, d, why)
		c.ops.end(id)
		c.release(ctx, id)
		return false, nil // never driven here: the handlers refuse it, and this is the last guard
	}
	switch held, err := c.claim(ctx, id, kind); {
	case err != nil:
		return true, err // the apiserver holding the claims is down: nothing could be applied either
	case !held && c.ops.intended(id):
		return true, errClaimHeld
	case !held:
		return false, nil // a live replica drives it
	}
	ns, err := c.placeOf(ctx, cl)
	if err != nil {
		return true, err
	}
	if kind != magnum.StatusDeleteInProgress {
		// The handlers refuse every change to a cluster taken over for its status and delete only.
		switch from, err := c.takenOverFrom(ctx, cl); {
		case err != nil:
			return true, err
		case from != "":
			return false, c.failOperation(ctx, cl, kind, "",
				&permanentError{fmt.Errorf("taken over from %s for its status, kubeconfig and delete only: it is not changed", from)})
		}
	}
	switch kind {
	case magnum.StatusCreateInProgress:
		err = c.applyCluster(ctx, cl, nil, nil)
	case magnum.StatusUpdateInProgress:
		if err = c.applyCluster(ctx, cl, nil, c.ops.upgrade(id)); err == nil {
			c.kube.Kick(ns, cl.StackID.Or(""))
		}
	case magnum.StatusDeleteInProgress:
		var gone bool
		if gone, err = c.kube.DeleteCluster(ctx, ns, cl.StackID.Or("")); err == nil && gone {
			if err = c.finishDelete(ctx, cl, nil); err == nil {
				c.release(ctx, id) // nothing of the cluster is left to drive
			}
		}
	}
	if err == nil {
		return false, nil
	}
	err = unwrapRetry(err)
	if errors.Is(err, errAwaitingCredentials) {
		c.release(ctx, id) // the redelivered create's handler, on any replica, needs the claim
	}
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
func operationOf(cl *magnum.Cluster) magnum.ClusterStatus {
	switch s := cl.Status.Or(""); s {
	case magnum.StatusCreateInProgress, magnum.StatusUpdateInProgress, magnum.StatusDeleteInProgress:
		return s
	}
	return ""
}

// timeout is how long an operation of this kind may take on this cluster.
func (c *Conductor) timeout(cl *magnum.Cluster, kind magnum.ClusterStatus) time.Duration {
	switch kind {
	case magnum.StatusCreateInProgress:
		if m := cl.CreateTimeout.Or(0); m > 0 {
			return time.Duration(m) * time.Minute
		}
		return 60 * time.Minute // Magnum's default create_timeout
	case magnum.StatusDeleteInProgress:
		return c.opts.DeleteTimeout
	}
	return c.opts.UpdateTimeout
}

// deadline is when the operation in progress must have finished.
func (c *Conductor) deadline(cl *magnum.Cluster, kind magnum.ClusterStatus) time.Time {
	if kind == magnum.StatusCreateInProgress {
		return cl.CreatedAt.Or(c.opts.Now()).Add(c.timeout(cl, kind))
	}
	last := cl.UpdatedAt.Or(cl.CreatedAt.Or(c.opts.Now()))
	return c.ops.startedAt(cl.UUID.Or(""), last).Add(c.timeout(cl, kind))
}

func timeoutName(kind magnum.ClusterStatus, d time.Duration) string {
	name := map[magnum.ClusterStatus]string{magnum.StatusCreateInProgress: "create_timeout", magnum.StatusUpdateInProgress: "update_timeout", magnum.StatusDeleteInProgress: "delete_timeout"}[kind]
	return fmt.Sprintf("%s of %s", name, d)
}

// failOperation ends the operation in progress as *_FAILED with a reason the tenant can act on;
// the node groups the operation was changing fail with it (feeding the API's faults).
func (c *Conductor) failOperation(ctx context.Context, cl *magnum.Cluster, kind magnum.ClusterStatus, what string, cause error) error {
	id := cl.UUID.Or("")
	failed := magnum.FailedOf(kind)
	reason := c.reasonFor(id, cause)
	if what != "" {
		reason = operationNoun(kind) + " " + what + ": " + reason
	}
	if err := c.store.UpdateCluster(ctx, id, ClusterUpdate{Status: &failed, StatusReason: &reason,
		OnlyIfStatus: []magnum.ClusterStatus{kind}}); err != nil && !errors.Is(err, ErrConflict) {
		return rpc.Retry(err)
	}
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return rpc.Retry(err)
	}
	for _, g := range groups {
		gs := g.Status.Or("")
		if _, running := magnum.Outcome(gs); !running {
			continue
		}
		fs := magnum.FailedOf(gs)
		if err := c.store.UpdateNodeGroup(ctx, g.UUID.Or(""), NodeGroupUpdate{ClusterUUID: id, Status: &fs, StatusReason: &reason,
			OnlyIfStatus: []magnum.ClusterStatus{gs}}); err != nil && !errors.Is(err, ErrConflict) {
			return rpc.Retry(err)
		}
	}
	c.ops.end(id)
	c.log.WarnContext(ctx, "operation failed", "cluster", id, "status", failed, "reason", reason)
	return nil
}

func operationNoun(kind magnum.ClusterStatus) string {
	return map[magnum.ClusterStatus]string{magnum.StatusCreateInProgress: "The create", magnum.StatusUpdateInProgress: "The update", magnum.StatusDeleteInProgress: "The delete"}[kind]
}

func unwrapRetry(err error) error {
	if rpc.IsRetryable(err) {
		if inner := errors.Unwrap(err); inner != nil {
			return inner
		}
	}
	return err
}
