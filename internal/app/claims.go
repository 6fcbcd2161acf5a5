package app

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Operation claims (conductor.Claims) are Kubernetes Leases in the bridge's namespace, next to the
// leader-election Lease: one per cluster with an operation in progress, named after the cluster's
// uuid, held by the replica's leader-election identity (unique per process). A claim whose holder
// stopped renewing for claimDuration is free to take: its replica died. Expiry compares the
// holder's renewTime with this replica's clock, as client-go's leader election does: replicas'
// clocks must agree to within a few seconds.
const (
	claimDuration = 20 * time.Second
	// claimFresh: a claim this replica wrote less than this ago is held without another write.
	claimFresh    = time.Second
	claimPrefix   = "magnum-capi-bridge-op-"
	claimSelector = "app.kubernetes.io/component=operation-claim"
	// resumeInterval is how often the leader resumes operations nobody holds: with claimDuration
	// it bounds how long an operation of a dead replica waits (about 50 s).
	resumeInterval = 30 * time.Second
)

type leaseClaims struct {
	leases    coordinationclient.LeasesGetter
	namespace string
	identity  string
	// host is this replica's [DEFAULT] host (unique per replica, as its magnum_service row): a
	// claim held by another process of the same host was left by this replica's previous life
	// (replicaIdentity), which is dead, and is taken at once instead of after its expiry.
	host string
	now  func() time.Time

	// held are the Leases this replica last wrote, by cluster: renewing or releasing one of them
	// is a single write whose resourceVersion precondition proves it is still ours, instead of a
	// read and a write. A write that finds it changed drops the copy and decides from a fresh read.
	mu   sync.Mutex
	held map[string]*coordinationv1.Lease
}

func (l *leaseClaims) cached(id string) *coordinationv1.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[id]
}

// remember records the Lease this replica just wrote; forget drops the copy only if it is still
// the one a failed write used, so a racing renewal's newer copy stays.
func (l *leaseClaims) remember(id string, lease *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]*coordinationv1.Lease{}
	}
	l.held[id] = lease
}

func (l *leaseClaims) forget(id string, used *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[id] == used {
		delete(l.held, id)
	}
}

func (l *leaseClaims) previousLife(holder string) bool {
	if l.host == "" || holder == l.identity {
		return false
	}
	rest, ok := strings.CutPrefix(holder, l.host+"_")
	return ok && strings.Count(rest, "_") == 1
}

func (l *leaseClaims) name(id string) string { return claimPrefix + id }

func (l *leaseClaims) expired(lease *coordinationv1.Lease) bool {
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil {
		return true
	}
	d := claimDuration
	if s.LeaseDurationSeconds != nil {
		d = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	return l.now().After(s.RenewTime.Add(d))
}

// Claim implements conductor.Claims: create the Lease, renew ours, or take an expired one. The
// apiserver's optimistic concurrency (resourceVersion) lets exactly one of racing replicas win; a
// write that lost a race is decided again from a fresh read (this replica's own renewals, from the
// driver and the renewal loop at once, race too, and must not look like a takeover).
func (l *leaseClaims) Claim(ctx context.Context, id string) (bool, error) {
	for range 4 {
		held, err := l.claimOnce(ctx, id)
		if !errors.Is(err, errLostRace) {
			return held, err
		}
	}
	return false, nil // contended all along: another replica is taking it now
}

var errLostRace = errors.New("lost a race for the claim")

func (l *leaseClaims) claimOnce(ctx context.Context, id string) (bool, error) {
	leases := l.leases.Leases(l.namespace)
	now := metav1.NewMicroTime(l.now())
	secs := int32(claimDuration / time.Second)
	// Renewing a claim this replica holds: one write; none when it wrote it moments ago (a create's
	// handler claims, then its driver): nobody else may take it for claimDuration after that write.
	if mine := l.cached(id); mine != nil {
		if r := mine.Spec.RenewTime; r != nil && l.now().Sub(r.Time) < claimFresh {
			return true, nil
		}
		renewed := mine.DeepCopy()
		renewed.Spec.RenewTime, renewed.Spec.LeaseDurationSeconds = &now, &secs
		updated, err := leases.Update(ctx, renewed, metav1.UpdateOptions{})
		if err == nil {
			l.remember(id, updated)
			return true, nil
		}
		l.forget(id, mine)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, errLostRace // taken, swept or renewed meanwhile: decide from a fresh read
		}
		return false, err
	}
	// A cluster's first claim: most often no Lease exists, so create first.
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name(id), Labels: map[string]string{
			"app.kubernetes.io/name": "magnum-capi-bridge", "app.kubernetes.io/component": "operation-claim"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &l.identity, LeaseDurationSeconds: &secs,
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err == nil {
		l.remember(id, created)
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	cur, err := leases.Get(ctx, l.name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, errLostRace // released between the create and the read
	}
	if err != nil {
		return false, err
	}
	mine := cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == l.identity
	if !mine && !l.expired(cur) && !l.previousLife(*cur.Spec.HolderIdentity) {
		return false, nil
	}
	if !mine {
		cur.Spec.AcquireTime = &now
		transitions := int32(0)
		if cur.Spec.LeaseTransitions != nil {
			transitions = *cur.Spec.LeaseTransitions
		}
		transitions++
		cur.Spec.LeaseTransitions = &transitions
	}
	cur.Spec.HolderIdentity, cur.Spec.RenewTime, cur.Spec.LeaseDurationSeconds = &l.identity, &now, &secs
	updated, err := leases.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, errLostRace // renewed, taken or released meanwhile: look again
		}
		return false, err
	}
	l.remember(id, updated)
	return true, nil
}

// Release implements conductor.Claims: delete the Lease if it is still ours (the resourceVersion
// precondition keeps a claim another replica just took).
func (l *leaseClaims) Release(ctx context.Context, id string) error {
	leases := l.leases.Leases(l.namespace)
	if mine := l.cached(id); mine != nil {
		// One delete: its precondition fails if another replica took the claim since our last write.
		err := leases.Delete(ctx, mine.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &mine.ResourceVersion}})
		l.forget(id, mine)
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		// Changed since: read it and release only if it is still ours (a renewal that raced us).
	}
	cur, err := leases.Get(ctx, l.name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.identity {
		return nil
	}
	return ignoreGoneOrTaken(leases.Delete(ctx, cur.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}}))
}

// Sweep implements conductor.Claims.
func (l *leaseClaims) Sweep(ctx context.Context, active func(string) bool) error {
	leases := l.leases.Leases(l.namespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: claimSelector})
	if err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		lease := &list.Items[i]
		id, ok := strings.CutPrefix(lease.Name, claimPrefix)
		if !ok || active(id) || !l.expired(lease) {
			continue
		}
		errs = append(errs, ignoreGoneOrTaken(leases.Delete(ctx, lease.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &lease.ResourceVersion}})))
	}
	return errors.Join(errs...)
}

func ignoreGoneOrTaken(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
