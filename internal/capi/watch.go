package capi

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Sink receives what the watch sees; the conductor implements it and writes Magnum's rows.
type Sink interface {
	// ClusterObserved is called whenever the Cluster or one of its machines or machine deployments
	// changes. A positive duration asks to be called again then even without a change (a timeout).
	ClusterObserved(ctx context.Context, clusterUUID string, obs Observation) (time.Duration, error)
	// ClusterGone is called when a Cluster the bridge made no longer exists.
	ClusterGone(ctx context.Context, namespace, name string) error
}

// Manager bundles the management-cluster client and the shared informers behind the watch.
type Manager struct {
	manager.Manager
	Client *Client
	// NamespacePrefix, when set before Watch, limits the status sync to namespaces with this prefix:
	// the bridge's own project namespaces. Other bridges (or tests) sharing the management cluster
	// are none of its business.
	NamespacePrefix string
	// Autoscalers, when set before Watch, watches the clusters' autoscaler Deployments too (the
	// bridge's role must allow it: AutoscalerRights).
	Autoscalers bool
	kicks       chan event.GenericEvent
}

// Kick asks the status reconciler to look at a cluster now. Needed after a change Magnum records but
// CAPI does not see (e.g. a node group's max_node_count without autoscaling): no object changes, so
// no watch event would ever complete the operation.
func (m *Manager) Kick(namespace, name string) {
	select {
	case m.kicks <- event.GenericEvent{Object: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}:
	default: // the queue is full: the reconciler is busy anyway and will see the latest state
	}
}

// KickAll asks the status reconciler to look at every Cluster of the bridge's namespaces (from the
// informer cache), waiting for room in the queue rather than dropping: a replica that has just
// become the leader catches up on what happened while another one was (or none was).
func (m *Manager) KickAll(ctx context.Context) (int, error) {
	var clusters clusterv1.ClusterList
	sel := metav1LabelSelector()
	if err := m.GetClient().List(ctx, &clusters, client.MatchingLabels(sel.MatchLabels)); err != nil {
		return 0, err
	}
	n := 0
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if !m.watched(c.Namespace) {
			continue
		}
		select {
		case m.kicks <- event.GenericEvent{Object: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}}:
			n++
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return n, nil
}

// watched reports whether the status sync looks at a namespace: the bridge's project namespaces,
// and magnum-cluster-api's, where the clusters it took over stay (only those labelled as the
// bridge's are synced).
func (m *Manager) watched(namespace string) bool {
	return strings.HasPrefix(namespace, m.NamespacePrefix) || namespace == templates.ClusterAPINamespace
}

// NewManager builds a controller-runtime manager with informers on Clusters, MachineDeployments and
// Machines. Nothing polls CAPI: the informers' watches drive every status update.
func NewManager(cfg *rest.Config) (*Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// Of the Deployments only the clusters' autoscalers (by label) are watched and cached.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/component": autoscaler.Component})},
		}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		return nil, fmt.Errorf("management cluster: %w", err)
	}
	// Writes go straight to the apiserver: a handler must see its own writes when a message is redelivered.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &Manager{Manager: mgr, Client: &Client{Client: direct, cloudCache: mgr.GetCache()}, kicks: make(chan event.GenericEvent, 1024)}, nil
}

// Watch registers the status reconciler.
func (m *Manager) Watch(sink Sink) error {
	managed, err := predicate.LabelSelectorPredicate(metav1LabelSelector())
	if err != nil {
		return err
	}
	toCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[clusterv1.ClusterNameLabel]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return m.watched(o.GetNamespace()) })
	b := ctrl.NewControllerManagedBy(m.Manager).
		Named("magnum-status").
		For(&clusterv1.Cluster{}, builder.WithPredicates(managed, ours)).
		Watches(&clusterv1.MachineDeployment{}, toCluster, builder.WithPredicates(ours)).
		Watches(&clusterv1.Machine{}, toCluster, builder.WithPredicates(ours)).
		// CAPI names a cluster's binding after the cluster; the add-on set after it plus -addons.
		Watches(&addonsv1.ClusterResourceSetBinding{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
		}), builder.WithPredicates(ours)).
		Watches(&addonsv1.ClusterResourceSet{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name, ok := strings.CutSuffix(o.GetName(), "-addons")
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}), builder.WithPredicates(managed, ours)).
		WatchesRawSource(source.Channel(m.kicks, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	if m.Autoscalers {
		// A cluster's autoscaler is named after it (internal/autoscaler.Name).
		b = b.Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name, ok := strings.CutSuffix(o.GetName(), autoscalerSuffix)
			if !ok || o.GetLabels()["app.kubernetes.io/component"] != autoscaler.Component {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}), builder.WithPredicates(managed, ours))
	}
	return b.Complete(&statusReconciler{cache: m.GetClient(), sink: sink, autoscalers: m.Autoscalers})
}

// autoscalerSuffix ends the name of a cluster's autoscaler objects.
var autoscalerSuffix = autoscaler.Name("")

type statusReconciler struct {
	cache client.Reader
	sink  Sink
	// autoscalers: the clusters' autoscaler Deployments are watched (Manager.Autoscalers).
	autoscalers bool
}

func (r *statusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var c clusterv1.Cluster
	if err := r.cache.Get(ctx, req.NamespacedName, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.sink.ClusterGone(ctx, req.Namespace, req.Name)
		}
		return reconcile.Result{}, err
	}
	uuid := c.Labels[templates.LabelClusterUUID]
	if uuid == "" {
		return reconcile.Result{}, nil // not ours
	}
	obs, err := observe(ctx, r.cache, &c, true)
	if err != nil {
		return reconcile.Result{}, err
	}
	if r.autoscalers {
		if obs.Autoscaler, err = autoscalerOf(ctx, r.cache, &c); err != nil {
			return reconcile.Result{}, err
		}
	}
	after, err := r.sink.ClusterObserved(ctx, uuid, obs)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// observe reads what Cluster API says about the cluster c: from the watch's caches, or from the
// apiserver itself (Client.Observe), then without the add-on set and its binding.
func observe(ctx context.Context, r client.Reader, c *clusterv1.Cluster, withAddons bool) (Observation, error) {
	var mds clusterv1.MachineDeploymentList
	if err := r.List(ctx, &mds, client.InNamespace(c.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}); err != nil {
		return Observation{}, err
	}
	var machines clusterv1.MachineList
	if err := r.List(ctx, &machines, client.InNamespace(c.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}); err != nil {
		return Observation{}, err
	}
	obs := Observation{Cluster: c, MachineDeployments: mds.Items, Machines: machines.Items}
	if set := c.Annotations[addons.AnnotationAddonSet]; set != "" && withAddons {
		var binding addonsv1.ClusterResourceSetBinding
		if err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, &binding); err == nil {
			obs.AddonBinding = &binding
		} else if !apierrors.IsNotFound(err) {
			return Observation{}, err
		}
		var crs addonsv1.ClusterResourceSet
		if err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: set}, &crs); err == nil {
			obs.AddonSet = &crs
		} else if !apierrors.IsNotFound(err) {
			return Observation{}, err
		}
	}
	return obs, nil
}

// Observe reads the Cluster, its MachineDeployments, MachineSets and Machines from the apiserver
// itself, not a cache (no add-on set: the caller keeps the watch's); found is false when the Cluster does not exist.
func (c *Client) Observe(ctx context.Context, namespace, name string) (obs Observation, found bool, err error) {
	var cl clusterv1.Cluster
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &cl); err != nil {
		if apierrors.IsNotFound(err) {
			return Observation{}, false, nil
		}
		return Observation{}, false, err
	}
	obs, err = observe(ctx, c.Client, &cl, false)
	if err != nil {
		return Observation{}, false, err
	}
	var sets clusterv1.MachineSetList
	err = c.List(ctx, &sets, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name})
	switch {
	case apierrors.IsForbidden(err):
		// A role from before MachineSets were listed: the counts decide, as they did then.
		if c.machineSetsForbidden.CompareAndSwap(false, true) && c.Log != nil {
			c.Log.Warn("MachineSets cannot be listed (does the bridge's role allow list on machinesets? deploy/kubernetes/rbac.yaml); an update's end is decided without them", "error", err)
		}
		return obs, true, nil
	case err != nil:
		return Observation{}, false, err
	}
	obs.MachineSets = sets.Items
	if obs.MachineSets == nil {
		obs.MachineSets = []clusterv1.MachineSet{}
	}
	return obs, true, nil
}

func metav1LabelSelector() metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}}
}
