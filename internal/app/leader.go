package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"
)

// Leader election timing (client-go's usual values): a leader that dies without releasing its
// Lease is replaced within LeaseDuration + RetryPeriod (about 17 s); one that shuts down cleanly
// releases it and is replaced within RetryPeriod.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// leadership elects one replica, with a Kubernetes Lease, to run what must run once: the status
// sync's writes, the start-up resync, the namespace re-ensure and the timers (create_timeout).
// Every replica consumes RPC messages (competing consumers) whether it leads or not.
type leadership struct {
	identity  string
	namespace string
	name      string
	log       *slog.Logger
	// lead runs while this replica leads; its context ends when leadership is lost.
	lead func(ctx context.Context)
	// changed is told about every change of this replica's state.
	changed func(leader bool)

	leading atomic.Bool
	mu      sync.Mutex
	current string // the leader's identity as last observed
}

func newLeadership(host, namespace, name string, log *slog.Logger, lead func(context.Context), changed func(bool)) *leadership {
	return &leadership{identity: replicaIdentity(host), namespace: namespace, name: name, log: log, lead: lead, changed: changed}
}

// replicaIdentity names this process in Leases (leader election and operation claims). Unique per
// process: a restarted replica must not take over a Lease of its previous life before that one's
// term ends (it might still be writing).
func replicaIdentity(host string) string {
	return fmt.Sprintf("%s_%d_%s", host, os.Getpid(), uuid.NewString()[:8])
}

// Leading reports whether this replica holds the Lease now.
func (l *leadership) Leading() bool { return l.leading.Load() }

// State is the readiness line: "leader" or "follower (leader: <id>)".
func (l *leadership) State() string {
	if l.Leading() {
		return "leader (" + l.identity + ")"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current == "" {
		return "follower (no leader observed yet)"
	}
	return "follower (leader: " + l.current + ")"
}

// Run campaigns until ctx ends, again after every lost term.
func (l *leadership) Run(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(l.namespace, l.name),
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, Name: l.name,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					l.set(true)
					l.log.Info("leader election: this replica leads; status sync, resync and timers run here",
						"lease", l.namespace+"/"+l.name, "identity", l.identity)
					l.lead(lctx)
				},
				OnStoppedLeading: func() {
					if l.leading.Load() {
						l.log.Warn("leader election: leadership lost or released", "lease", l.namespace+"/"+l.name, "identity", l.identity)
					}
					l.set(false)
				},
				OnNewLeader: func(id string) {
					l.mu.Lock()
					l.current = id
					l.mu.Unlock()
					if id != l.identity {
						l.log.Info("leader election: another replica leads", "lease", l.namespace+"/"+l.name, "leader", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx) // returns when leadership is lost or ctx ends
		if !backoff.Sleep(ctx, retryPeriod) {
			break
		}
	}
	return nil
}

func (l *leadership) set(v bool) {
	if l.leading.Swap(v) != v && l.changed != nil {
		l.changed(v)
	}
}

func metav1ObjectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
