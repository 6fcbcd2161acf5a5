package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/logctx"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/notify"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/telemetry"
)

// Metrics, notifications and the leader gate are wired around the conductor, not into it: the
// store wrapper sees every status the conductor writes (operation start and end, the status lag,
// database errors) and emits Magnum's notifications there; the sink wrapper gates the status sync
// on leadership and tells the store wrapper which CAPI transition a write follows.

// observedStore wraps the conductor's store.
type observedStore struct {
	conductor.Store
	metrics *telemetry.Metrics
	notes   *notify.Notifier // nil: notifications off
	ops     *operations
	now     func() time.Time
	// changed, when set, hears of every write to a cluster's rows (the tenant API's objects follow
	// Magnum from there, without polling magnum-api); nodeGroup says the row was a node group's,
	// which the status sync writes just before the cluster's own.
	changed func(ctx context.Context, clusterUUID string, nodeGroup bool)
}

func (s *observedStore) wrote(ctx context.Context, clusterUUID string) {
	if s.changed != nil {
		s.changed(ctx, clusterUUID, false)
	}
}

func (s *observedStore) wroteNodeGroup(ctx context.Context, clusterUUID string) {
	if s.changed != nil {
		s.changed(ctx, clusterUUID, true)
	}
}

func newObservedStore(st conductor.Store, m *telemetry.Metrics, notes *notify.Notifier) *observedStore {
	return &observedStore{Store: st, metrics: m, notes: notes, ops: &operations{started: map[string]opStart{}}, now: time.Now}
}

// dbErr counts err as a database error unless it is an answer (not found, lost race) or the
// caller gave up.
func (s *observedStore) dbErr(ctx context.Context, err error) error {
	if err != nil && !errors.Is(err, conductor.ErrNotFound) && !errors.Is(err, conductor.ErrConflict) && ctx.Err() == nil &&
		!isMagnumException(err) {
		s.metrics.DependencyError(telemetry.Database)
	}
	return err
}

func isMagnumException(err error) bool {
	var me *magnum.Exception
	return errors.As(err, &me)
}

// requestContext is the RPC context of the message being handled, nil in the status sync.
func requestContext(ctx context.Context) *rpc.Context {
	if r := rpc.RequestFrom(ctx); r != nil {
		return r.Context
	}
	return nil
}

func (s *observedStore) CreateCluster(ctx context.Context, c *magnum.Cluster, groups []*magnum.NodeGroup) (bool, error) {
	created, err := s.Store.CreateCluster(ctx, c, groups)
	if err = s.dbErr(ctx, err); err != nil || !created {
		return created, err
	}
	s.ops.start(c.UUID.Or(""), notify.ActionCreate, s.now())
	s.notes.ClusterOperation(ctx, requestContext(ctx), notify.ActionCreate, notify.OutcomePending, c, groups)
	s.wrote(ctx, c.UUID.Or(""))
	return created, nil
}

func (s *observedStore) GetCluster(ctx context.Context, uuid string) (*magnum.Cluster, error) {
	cl, err := s.Store.GetCluster(ctx, uuid)
	if err == nil {
		// An operation another replica started: timed from the row's last write.
		if st := string(cl.Status.Or("")); cl.Status.Or("").IsInProgress() {
			since := cl.UpdatedAt.Or(cl.CreatedAt.Or(s.now()))
			if notify.ActionOf(st) == notify.ActionCreate {
				since = cl.CreatedAt.Or(since)
			}
			s.ops.startIfUnknown(uuid, notify.ActionOf(st), since)
		}
	}
	return cl, s.dbErr(ctx, err)
}

func (s *observedStore) GetClusterTemplate(ctx context.Context, uuid string) (*magnum.ClusterTemplate, error) {
	t, err := s.Store.GetClusterTemplate(ctx, uuid)
	return t, s.dbErr(ctx, err)
}

func (s *observedStore) ListNodeGroups(ctx context.Context, clusterUUID string) ([]*magnum.NodeGroup, error) {
	g, err := s.Store.ListNodeGroups(ctx, clusterUUID)
	return g, s.dbErr(ctx, err)
}

func (s *observedStore) ListClustersByStatus(ctx context.Context, statuses ...magnum.ClusterStatus) ([]*magnum.Cluster, error) {
	c, err := s.Store.ListClustersByStatus(ctx, statuses...)
	return c, s.dbErr(ctx, err)
}

func (s *observedStore) UpdateCluster(ctx context.Context, uuid string, u conductor.ClusterUpdate) error {
	if err := s.dbErr(ctx, s.Store.UpdateCluster(ctx, uuid, u)); err != nil {
		return err
	}
	s.wrote(ctx, uuid)
	if u.Status == nil {
		return nil
	}
	status := string(*u.Status)
	st := *u.Status
	action := notify.ActionOf(status)
	now := s.now()
	if transition, fromSync := transitionFrom(ctx); fromSync {
		lag := time.Duration(-1)
		if !transition.IsZero() {
			lag = max(now.Sub(transition), 0)
		}
		s.metrics.StatusWritten(status, lag)
	}
	var outcome string
	switch {
	case st.IsInProgress():
		s.ops.start(uuid, action, now)
		outcome = notify.OutcomePending
	case st.IsComplete(), st.IsFailed():
		if kind, d, ok := s.ops.finish(uuid, now); ok {
			s.metrics.Operation(kind, status, d)
		}
		outcome = notify.OutcomeSuccess
		if st.IsFailed() {
			outcome = notify.OutcomeFailure
		}
	}
	if s.notes != nil && action != "" && outcome != "" {
		s.notifyCluster(ctx, uuid, action, outcome)
	}
	return nil
}

// notifyCluster sends a notification carrying the cluster as now stored.
func (s *observedStore) notifyCluster(ctx context.Context, uuid, action, outcome string) {
	cl, err := s.Store.GetCluster(ctx, uuid)
	if err != nil {
		cl = nil
	}
	groups, _ := s.Store.ListNodeGroups(ctx, uuid)
	s.notes.ClusterOperation(ctx, requestContext(ctx), action, outcome, cl, groups)
}

func (s *observedStore) UpdateNodeGroup(ctx context.Context, uuid string, u conductor.NodeGroupUpdate) error {
	return s.dbErr(ctx, s.Store.UpdateNodeGroup(ctx, uuid, u))
}

func (s *observedStore) DeleteCluster(ctx context.Context, uuid string) error {
	var cl *magnum.Cluster
	var groups []*magnum.NodeGroup
	if s.notes != nil {
		cl, _ = s.Store.GetCluster(ctx, uuid)
		groups, _ = s.Store.ListNodeGroups(ctx, uuid)
	}
	if err := s.dbErr(ctx, s.Store.DeleteCluster(ctx, uuid)); err != nil {
		return err
	}
	if kind, d, ok := s.ops.finish(uuid, s.now()); ok {
		s.metrics.Operation(kind, string(magnum.StatusDeleteComplete), d)
	}
	if _, fromSync := transitionFrom(ctx); fromSync {
		s.metrics.StatusWritten(string(magnum.StatusDeleteComplete), -1)
	}
	s.wrote(ctx, uuid)
	if cl != nil {
		cl.Status.Set(magnum.StatusDeleteComplete)
		// Magnum's periodic sync notifies the end of a delete as its admin context.
		s.notes.ClusterOperation(ctx, nil, notify.ActionDelete, notify.OutcomeSuccess, cl, groups)
	}
	return nil
}

func (s *observedStore) CreateNodeGroup(ctx context.Context, ng *magnum.NodeGroup) (bool, error) {
	created, err := s.Store.CreateNodeGroup(ctx, ng)
	if err == nil {
		s.wroteNodeGroup(ctx, ng.ClusterID.Or(""))
	}
	return created, s.dbErr(ctx, err)
}

func (s *observedStore) GetNodeGroup(ctx context.Context, clusterUUID, uuid string) (*magnum.NodeGroup, error) {
	g, err := s.Store.GetNodeGroup(ctx, clusterUUID, uuid)
	return g, s.dbErr(ctx, err)
}

func (s *observedStore) SaveNodeGroupChanges(ctx context.Context, ng *magnum.NodeGroup, onlyIfStatus ...magnum.ClusterStatus) error {
	err := s.Store.SaveNodeGroupChanges(ctx, ng, onlyIfStatus...)
	if err == nil {
		s.wroteNodeGroup(ctx, ng.ClusterID.Or(""))
	}
	return s.dbErr(ctx, err)
}

func (s *observedStore) DeleteNodeGroup(ctx context.Context, clusterUUID, uuid string) error {
	err := s.Store.DeleteNodeGroup(ctx, clusterUUID, uuid)
	if err == nil {
		s.wroteNodeGroup(ctx, clusterUUID)
	}
	return s.dbErr(ctx, err)
}

// operations remembers when each cluster's current operation started, in this process.
type operations struct {
	mu      sync.Mutex
	started map[string]opStart
}

type opStart struct {
	kind string
	at   time.Time
}

func (o *operations) start(uuid, kind string, at time.Time) {
	if uuid == "" || kind == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Always the latest start: the end of an earlier operation may have been written by another
	// replica, so an entry here can be stale (a retried write restarts the clock, which only
	// shortens that one measurement).
	o.started[uuid] = opStart{kind, at}
}

func (o *operations) startIfUnknown(uuid, kind string, at time.Time) {
	if uuid == "" || kind == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.started[uuid]; !ok {
		o.started[uuid] = opStart{kind, at}
	}
}

func (o *operations) finish(uuid string, at time.Time) (string, time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.started[uuid]
	if !ok {
		return "", 0, false
	}
	delete(o.started, uuid)
	return s.kind, max(at.Sub(s.at), 0), true
}

// ---- the status sync, gated on leadership ------------------------------------------------------

type transitionKey struct{}

// transitionFrom returns the latest CAPI transition the status sync is acting on; fromSync is
// false outside the status sync.
func transitionFrom(ctx context.Context) (at time.Time, fromSync bool) {
	at, fromSync = ctx.Value(transitionKey{}).(time.Time)
	return at, fromSync
}

// latestTransition is the newest lastTransitionTime among the conditions of the Cluster, its
// MachineDeployments and Machines: the change the status sync is reacting to.
func latestTransition(obs capi.Observation) time.Time {
	var latest time.Time
	see := func(conds []metav1.Condition) {
		for _, c := range conds {
			if t := c.LastTransitionTime.Time; t.After(latest) {
				latest = t
			}
		}
	}
	if obs.Cluster != nil {
		see(obs.Cluster.Status.Conditions)
	}
	for i := range obs.MachineDeployments {
		see(obs.MachineDeployments[i].Status.Conditions)
	}
	for i := range obs.Machines {
		see(obs.Machines[i].Status.Conditions)
	}
	return latest
}

// gatedSink runs the status sync only on the leader, except for a cluster this replica kicked
// itself (a change CAPI cannot see, made by a message this replica handled): that one look is
// safe anywhere, because the conductor's writes are guarded by the status they were computed from.
type gatedSink struct {
	sink   capi.Sink
	leader func() bool
	kicked *kickMarks
}

func (g *gatedSink) ClusterObserved(ctx context.Context, id string, obs capi.Observation) (time.Duration, error) {
	key := ""
	if obs.Cluster != nil {
		key = obs.Cluster.Namespace + "/" + obs.Cluster.Name
	}
	if !g.leader() && !g.kicked.take(key) {
		return 0, nil
	}
	ctx = logctx.With(context.WithValue(ctx, transitionKey{}, latestTransition(obs)), slog.String("cluster", id))
	return g.sink.ClusterObserved(ctx, id, obs)
}

func (g *gatedSink) ClusterGone(ctx context.Context, namespace, name string) error {
	if !g.leader() && !g.kicked.take(namespace+"/"+name) {
		return nil
	}
	return g.sink.ClusterGone(context.WithValue(ctx, transitionKey{}, time.Time{}), namespace, name)
}

// kickMarks are the clusters this replica kicked and has not looked at since.
type kickMarks struct {
	mu sync.Mutex
	m  map[string]bool
}

func (k *kickMarks) mark(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]bool{}
	}
	if len(k.m) < 10000 {
		k.m[key] = true
	}
}

func (k *kickMarks) take(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m[key] {
		delete(k.m, key)
		return true
	}
	return false
}

// ---- dependency errors on HTTP clients ----------------------------------------------------------

// countingTransport counts failed requests (transport errors and 5xx answers) to a dependency.
type countingTransport struct {
	next  http.RoundTripper
	count func()
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil { // an http.Client's nil Transport means the default one
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if (err != nil && r.Context().Err() == nil) || (resp != nil && resp.StatusCode >= 500) {
		t.count()
	}
	return resp, err
}

// watchKinds are the informers whose events are counted.
var watchKinds = map[string]func() client.Object{
	"Cluster":           func() client.Object { return &clusterv1.Cluster{} },
	"MachineDeployment": func() client.Object { return &clusterv1.MachineDeployment{} },
	"Machine":           func() client.Object { return &clusterv1.Machine{} },
}
