package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
)

const (
	// ownerTTL: a deployment whose replicas have not renewed the database for this long has
	// stopped, and another may take it over.
	ownerTTL = time.Minute
	// ownerRenewal is how often a replica renews its deployment's ownership (and a waiting one
	// tries to take it).
	ownerRenewal = 15 * time.Second
)

// databaseOwner keeps this bridge deployment the owner of Magnum's database (db.ClaimOwnership):
// a replica serves nothing until its deployment owns the database, and stops when another
// deployment has taken it.
type databaseOwner struct {
	store      *db.Store
	deployment string
	replica    string
	log        *slog.Logger
	now        func() time.Time

	held atomic.Bool
	mu   sync.Mutex
	last db.Owner
}

// deploymentName names this bridge deployment, the same for all its replicas: its leader election
// Lease in its management cluster, told apart by the uid of its kube-system namespace (the
// apiserver's address may be the same in-cluster address in every management cluster). An identity
// that may not list namespaces names the management cluster by its apiserver's address.
func deploymentName(ctx context.Context, cfg *rest.Config, o *Options) (string, error) {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return "", err
	}
	cluster := "at " + cfg.Host
	// The bridge may list namespaces (deploy/kubernetes/rbac.yaml), not get them.
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kube-system"})
	switch {
	case err == nil && len(list.Items) == 1:
		cluster = string(list.Items[0].UID)
	case err != nil && !apierrors.IsForbidden(err):
		return "", fmt.Errorf("the management cluster's identity (its kube-system namespace): %w", err)
	}
	return fmt.Sprintf("%s/%s in management cluster %s", o.Bridge.LeaderElectionNamespace, o.Bridge.LeaderElectionID, cluster), nil
}

// claim tries once to take or renew the database for this deployment.
func (d *databaseOwner) claim(ctx context.Context) (bool, error) {
	owner, held, err := d.store.ClaimOwnership(ctx, d.deployment, d.replica, ownerTTL)
	if err != nil {
		return d.held.Load(), err // the database is unreachable: nobody else can take it meanwhile either
	}
	d.mu.Lock()
	d.last = owner
	d.mu.Unlock()
	d.held.Store(held)
	return held, nil
}

// acquire returns once this deployment owns the database (or ctx ends), saying every minute
// while it waits who owns it.
func (d *databaseOwner) acquire(ctx context.Context) error {
	var said time.Time
	return wait.PollUntilContextCancel(ctx, ownerRenewal, true, func(ctx context.Context) (bool, error) {
		held, err := d.claim(ctx)
		switch {
		case err != nil:
			d.log.Warn("claiming the Magnum database failed; tried again", "error", err)
		case held:
			d.log.Info("this bridge deployment owns the Magnum database", "deployment", d.deployment)
		case d.now().Sub(said) >= time.Minute:
			said = d.now()
			d.log.Warn(d.refusal())
		}
		return held, nil
	})
}

// keep renews the ownership until ctx ends. It returns an error when another deployment has
// taken the database (this one was not heard of for ownerTTL): the replica must stop serving.
func (d *databaseOwner) keep(ctx context.Context) error {
	t := time.NewTicker(ownerRenewal)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		held, err := d.claim(ctx)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("renewing the ownership of the Magnum database failed; tried again", "error", err)
			}
			continue
		}
		if !held {
			return errors.New(d.refusal() + "; this replica stops")
		}
	}
}

// refusal says who owns the database, for the log, readiness and --check-config.
func (d *databaseOwner) refusal() string {
	d.mu.Lock()
	o := d.last
	d.mu.Unlock()
	return ownerRefusal(o, d.now())
}

func ownerRefusal(o db.Owner, now time.Time) string {
	return fmt.Sprintf("another bridge deployment owns this Magnum database: %s (replica %s, renewed %s ago); this one drives nothing "+
		"until that one has stopped for %s (two deployments on one database would both drive its clusters)",
		o.Deployment, o.Replica, now.Sub(o.Renewed).Round(time.Second), ownerTTL)
}

// check is the readiness line.
func (d *databaseOwner) check(context.Context) (string, error) {
	if d.held.Load() {
		return "owned by this deployment (" + d.deployment + ")", nil
	}
	d.mu.Lock()
	claimed := d.last.Deployment != ""
	d.mu.Unlock()
	if !claimed {
		return "", errors.New("not claimed yet")
	}
	return "", errors.New(d.refusal())
}

// checkOwner is --check-config's line: whether this deployment would own the database.
func checkOwner(ctx context.Context, st *db.Store, deployment string, now time.Time) (string, error) {
	o, found, err := st.DatabaseOwner(ctx)
	switch {
	case err != nil:
		return "", err
	case !found:
		return "no bridge deployment owns it yet: this one will (" + deployment + ")", nil
	case o.Deployment == deployment:
		return "owned by this deployment (" + deployment + ")", nil
	case now.Sub(o.Renewed) > ownerTTL:
		return fmt.Sprintf("owned by %s, not renewed for %s: this deployment will take it over", o.Deployment, now.Sub(o.Renewed).Round(time.Second)), nil
	}
	return "", errors.New(ownerRefusal(o, now))
}
