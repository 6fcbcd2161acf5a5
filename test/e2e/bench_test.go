package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// magnumRPC is magnum-api's side of the RPC wire of the local stack: its magnum.conf and a client
// speaking as it does.
func magnumRPC(tb testing.TB) (*config.File, *rpc.Client) {
	tb.Helper()
	conf, err := config.Load(testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"))
	require.NoError(tb, err)
	opts, err := rpc.OptionsFromConfig(conf)
	require.NoError(tb, err)
	cl, err := rpc.NewClient(opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = cl.Close() })
	return conf, cl
}

// benchEnv talks to the local stack directly: magnum-api's own RPC wire (casts byte-compatible
// with magnum-api's), Magnum's database and the management cluster.
type benchEnv struct {
	rpc      *rpc.Client
	store    *db.Store
	kube     client.WithWatch
	project  string
	user     string
	template string
	// token and authURL are the demo user's, as magnum-api forwards them: the bridge issues the
	// cluster's application credentials with them.
	token, authURL string
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	conf, cl := magnumRPC(b)
	st := magnumStore(b, conf)
	cfg, err := capi.RESTConfig(mgmtKubeconfig)
	require.NoError(b, err)
	scheme, err := capi.NewScheme()
	require.NoError(b, err)
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	require.NoError(b, err)

	tok := tokenOf(b, cloudDemo)
	name := "bench-" + testutil.RandomHex(3)
	_, err = runCLI(cloudDemo, "coe", "cluster", "template", "create", name, "--coe", "kubernetes", "--image", image,
		"--external-network", "public", "--flavor", "m1.small", "--master-flavor", "m1.medium", "--keypair", "default")
	require.NoError(b, err)
	out, err := runCLI(cloudDemo, "coe", "cluster", "template", "show", name, "-f", "value", "-c", "uuid")
	require.NoError(b, err)
	b.Cleanup(func() { _, _ = runCLI(cloudDemo, "coe", "cluster", "template", "delete", name) })
	return &benchEnv{rpc: cl, store: st, kube: kube, project: tok.ProjectID, user: tok.UserID, template: strings.TrimSpace(out),
		token: tok.ID, authURL: conf.String("keystone_authtoken", "www_authenticate_uri", "")}
}

func (e *benchEnv) context() *rpc.Context {
	return &rpc.Context{User: e.user, UserID: e.user, ProjectID: e.project, Project: e.project,
		Roles: []string{"member", "reader"}, RequestID: "req-" + uuid.NewString(), UserName: "demo", ProjectName: "demo",
		AuthToken: e.token, AuthURL: e.authURL}
}

// castCreate sends cluster_create as magnum-api 15.0.1 does (Cluster 1.23, all set fields changed).
func (e *benchEnv) castCreate(ctx context.Context, id, name string, labels map[string]string) error {
	c := &magnum.Cluster{}
	c.UUID.Set(id)
	c.Name.Set(name)
	c.ProjectID.Set(e.project)
	c.UserID.Set(e.user)
	c.ClusterTemplateID.Set(e.template)
	c.Keypair.Set("default")
	c.Labels.Set(magnum.DictFromMap(labels))
	c.MasterFlavorID.Set("m1.medium")
	c.FlavorID.Set("m1.small")
	c.CreateTimeout.Set(60)
	c.FloatingIPEnabled.Set(true)
	c.MasterLBEnabled.Set(false)
	obj, err := magnum.EncodeAt(c, magnum.MustVersion("1.23"), nil)
	if err != nil {
		return err
	}
	return e.rpc.Cast(ctx, "cluster_create", map[string]any{"cluster": obj, "master_count": 1, "node_count": 1, "create_timeout": 60}, e.context())
}

func (e *benchEnv) castDelete(ctx context.Context, id string) error {
	return e.rpc.Cast(ctx, "cluster_delete", map[string]any{"uuid": id}, e.context())
}

// watchClusters reports, per Magnum cluster uuid, when its CAPI Cluster was first seen and when it
// was first seen Available, and keeps the time of every event on the objects the bridge's status
// decision reads (the Cluster, its MachineDeployments, Machines and ClusterResourceSetBinding).
type clusterTimes struct {
	mu        sync.Mutex
	created   map[string]time.Time
	available map[string]time.Time
	// names maps a CAPI Cluster's namespace/name to the Magnum uuid; events are by namespace/name.
	names  map[string]string
	events map[string][]time.Time
}

func (e *benchEnv) watchClusters(ctx context.Context, b *testing.B) *clusterTimes {
	w, err := e.kube.Watch(ctx, &clusterv1.ClusterList{}, client.MatchingLabels{templates.LabelManagedBy: templates.ManagedByValue})
	require.NoError(b, err)
	ct := &clusterTimes{created: map[string]time.Time{}, available: map[string]time.Time{}, names: map[string]string{},
		events: map[string][]time.Time{}}
	// Whose cluster an object belongs to: the binding is named after it, the others carry its label.
	owners := map[client.ObjectList]func(client.Object) string{
		&clusterv1.MachineDeploymentList{}:        func(o client.Object) string { return o.GetLabels()[clusterv1.ClusterNameLabel] },
		&clusterv1.MachineList{}:                  func(o client.Object) string { return o.GetLabels()[clusterv1.ClusterNameLabel] },
		&addonsv1.ClusterResourceSetBindingList{}: func(o client.Object) string { return o.GetName() },
	}
	for list, owner := range owners {
		ow, err := e.kube.Watch(ctx, list)
		require.NoError(b, err)
		go func() {
			defer ow.Stop()
			for ev := range ow.ResultChan() {
				if o, ok := ev.Object.(client.Object); ok && owner(o) != "" {
					ct.event(o.GetNamespace()+"/"+owner(o), time.Now())
				}
			}
		}()
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			now := time.Now()
			c, ok := ev.Object.(*clusterv1.Cluster)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			id := c.Labels[templates.LabelClusterUUID]
			ct.mu.Lock()
			if _, seen := ct.created[id]; !seen {
				ct.created[id] = now
			}
			ct.names[c.Namespace+"/"+c.Name] = id
			ct.events[c.Namespace+"/"+c.Name] = append(ct.events[c.Namespace+"/"+c.Name], now)
			for _, cond := range c.Status.Conditions {
				if cond.Type == clusterv1.AvailableCondition && cond.Status == metav1.ConditionTrue {
					if _, seen := ct.available[id]; !seen {
						ct.available[id] = now
					}
				}
			}
			ct.mu.Unlock()
		}
	}()
	return ct
}

func (ct *clusterTimes) get(id string) (created, available time.Time) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.created[id], ct.available[id]
}

func (ct *clusterTimes) event(key string, at time.Time) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.events[key] = append(ct.events[key], at)
}

// lastEventBefore is the newest event on the objects of the Magnum cluster id seen before t.
func (ct *clusterTimes) lastEventBefore(id string, t time.Time) time.Time {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	var last time.Time
	for name, uuid := range ct.names {
		if uuid != id {
			continue
		}
		for _, at := range ct.events[name] {
			if at.Before(t) && at.After(last) {
				last = at
			}
		}
	}
	return last
}

func (e *benchEnv) deleteAll(ctx context.Context, b *testing.B, ids []string) {
	for _, id := range ids {
		require.NoError(b, e.castDelete(ctx, id))
	}
	deadline := time.Now().Add(10 * time.Minute)
	for _, id := range ids {
		for {
			_, err := e.store.GetCluster(ctx, id)
			if err != nil {
				break
			}
			require.True(b, time.Now().Before(deadline), "cluster %s not deleted", id)
			time.Sleep(time.Second)
		}
	}
}

// BenchmarkCreateCastToCAPICluster: time from the cluster_create cast to the CAPI Cluster existing in
// the management cluster, over 50 creates sent one after another (make bench runs it once: -benchtime 1x).
func BenchmarkCreateCastToCAPICluster(b *testing.B) {
	requireStackB(b)
	e := newBenchEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ct := e.watchClusters(ctx, b)
	const n = 50
	for range b.N {
		var ids []string
		var lat []time.Duration
		for i := range n {
			id := uuid.NewString()
			ids = append(ids, id)
			start := time.Now()
			// Slow fake machines keep 50 clusters from loading the 2-core machine while they exist.
			require.NoError(b, e.castCreate(ctx, id, fmt.Sprintf("bench-%d", i), map[string]string{"inmemory_machine_startup": "1h"}))
			for {
				if created, _ := ct.get(id); !created.IsZero() {
					lat = append(lat, created.Sub(start))
					break
				}
				require.NoError(b, ctx.Err())
				time.Sleep(2 * time.Millisecond)
			}
		}
		b.ReportMetric(float64(testutil.Percentile(lat, 0.5).Milliseconds()), "p50-ms")
		b.ReportMetric(float64(testutil.Percentile(lat, 0.99).Milliseconds()), "p99-ms")
		b.ReportMetric(n, "creates")
		e.deleteAll(ctx, b, ids)
	}
}

// BenchmarkAvailableToCreateComplete: lag from the watch seeing the CAPI Cluster Available to
// CREATE_COMPLETE in Magnum's database (Magnum's own periodic sync takes up to 10 s). CREATE_COMPLETE
// also waits for what CAPI settles after Available (rollouts, Machines Ready, add-ons applied);
// after-last-event-* counts from the last event on those objects instead.
func BenchmarkAvailableToCreateComplete(b *testing.B) {
	requireStackB(b)
	e := newBenchEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ct := e.watchClusters(ctx, b)
	const n = 8
	for range b.N {
		var ids []string
		for i := range n {
			id := uuid.NewString()
			ids = append(ids, id)
			require.NoError(b, e.castCreate(ctx, id, fmt.Sprintf("lag-%d", i), map[string]string{}))
		}
		// lags count from Available; own from the last CAPI event before CREATE_COMPLETE was seen
		// (CAPI goes on after Available: rollouts settle, Machines report Ready, the add-ons are
		// applied), an estimate of the bridge's own share from below: an unrelated event in between
		// shortens it.
		lags, own := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
		pending := map[string]bool{}
		for _, id := range ids {
			pending[id] = true
		}
		for len(pending) > 0 {
			require.NoError(b, ctx.Err(), "clusters never completed")
			for id := range pending {
				row, err := e.store.GetCluster(ctx, id)
				if errors.Is(err, magnum.ErrClusterNotFound) {
					continue // the cast is not handled yet
				}
				require.NoError(b, err)
				if row.Status == magnum.ClusterStatus("CREATE_COMPLETE") {
					seen := time.Now()
					_, avail := ct.get(id)
					require.False(b, avail.IsZero(), "CREATE_COMPLETE before the watch saw Available")
					lags = append(lags, seen.Sub(avail))
					own = append(own, seen.Sub(ct.lastEventBefore(id, seen)))
					delete(pending, id)
				}
				require.NotEqual(b, magnum.ClusterStatus("CREATE_FAILED"), row.Status, "%v", row.StatusReason)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.ReportMetric(float64(testutil.Percentile(lags, 0.5).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(testutil.Percentile(lags, 0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(testutil.Percentile(own, 0.5).Microseconds())/1000, "after-last-event-p50-ms")
		b.ReportMetric(float64(testutil.Percentile(own, 0.99).Microseconds())/1000, "after-last-event-p99-ms")
		b.ReportMetric(n, "clusters")
		e.deleteAll(ctx, b, ids)
	}
}
