package tenantapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

// uuidIndex indexes the objects by the uuid of their Magnum cluster, for Kick.
const uuidIndex = "status.uuid"

// Resync is how often an object is looked at without a change: the safety net for a change to
// Magnum the bridge did not write itself (another conductor replica's write reaches the leader's
// watch only once CAPI moves).
const Resync = 5 * time.Minute

// retryCredential is when an object whose credential failed is looked at again: the bridge cannot
// watch the tenants' Secrets (it may only get them).
const retryCredential = 30 * time.Second

// Reconciler drives MagnumCluster objects.
type Reconciler struct {
	// Cache reads the objects (the manager's informers); Direct writes them and reads Secrets.
	Cache, Direct client.Client
	Clients       *Clients
	// NamespacePrefix: only objects in project namespaces are reconciled; the project is the rest
	// of the namespace's name.
	NamespacePrefix string
	Log             *slog.Logger
	// Leading gates the reconciles on the replica that leads (nil: always): the others keep their
	// caches warm and hand over without a gap.
	Leading func() bool
	kicks   chan event.GenericEvent
	// created remembers when this process asked for each object's create (by UID), so that a read
	// from a cache that has not yet seen the status written with it cannot ask twice.
	created sync.Map
}

// Setup registers the reconciler with the manager.
func (r *Reconciler) Setup(ctx context.Context, mgr manager.Manager) error {
	r.kicks = make(chan event.GenericEvent, 1024)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.MagnumCluster{}, uuidIndex, func(o client.Object) []string {
		if u := o.(*v1alpha1.MagnumCluster).Status.UUID; u != "" {
			return []string{u}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("magnum-tenant-api").
		For(&v1alpha1.MagnumCluster{}).
		WatchesRawSource(source.Channel(r.kicks, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// Kick asks for the objects of a Magnum cluster to be reconciled: the bridge has just written its
// row, so the object's status follows Magnum without polling it. A node group's row is written
// just before its cluster's: that kick waits a moment, so the reconcile that shows the cluster's
// write is not queued behind one that ran before it.
func (r *Reconciler) Kick(ctx context.Context, clusterUUID string, nodeGroup bool) {
	if r == nil || r.kicks == nil || clusterUUID == "" {
		return
	}
	if nodeGroup {
		time.AfterFunc(nodeGroupKickDelay, func() { r.kick(context.WithoutCancel(ctx), clusterUUID) })
		return
	}
	r.kick(ctx, clusterUUID)
}

// nodeGroupKickDelay is how long a node group's kick waits for its cluster's.
const nodeGroupKickDelay = 500 * time.Millisecond

func (r *Reconciler) kick(ctx context.Context, clusterUUID string) {
	var list v1alpha1.MagnumClusterList
	if err := r.Cache.List(ctx, &list, client.MatchingFields{uuidIndex: clusterUUID}); err != nil {
		return // the cache is not started (not the leader) or not synced: the resync covers it
	}
	for i := range list.Items {
		o := &list.Items[i]
		select {
		case r.kicks <- event.GenericEvent{Object: &v1alpha1.MagnumCluster{ObjectMeta: *o.ObjectMeta.DeepCopy()}}:
		default: // the queue is full: the object is queued already
		}
	}
}

// KickAll queues every object: a replica that has just become the leader catches up.
func (r *Reconciler) KickAll(ctx context.Context) {
	var list v1alpha1.MagnumClusterList
	if err := r.Cache.List(ctx, &list); err != nil {
		r.Log.Warn("tenant API: listing the MagnumClusters", "error", err)
		return
	}
	for i := range list.Items {
		select {
		case r.kicks <- event.GenericEvent{Object: &v1alpha1.MagnumCluster{ObjectMeta: *list.Items[i].ObjectMeta.DeepCopy()}}:
		case <-ctx.Done():
			return
		}
	}
}

func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !strings.HasPrefix(req.Namespace, r.NamespacePrefix) {
		return reconcile.Result{}, nil
	}
	if r.Leading != nil && !r.Leading() {
		return reconcile.Result{}, nil // the leader's KickAll takes it up on a hand-over
	}
	var obj v1alpha1.MagnumCluster
	if err := r.Cache.Get(ctx, req.NamespacedName, &obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log := r.Log.With("magnumcluster", req.String())
	if obj.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(&obj, Finalizer) {
		patch := client.MergeFrom(obj.DeepCopy())
		controllerutil.AddFinalizer(&obj, Finalizer)
		if err := r.Direct.Patch(ctx, &obj, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	if obj.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(&obj, Finalizer) {
		return reconcile.Result{}, nil
	}
	api, key, err := r.api(ctx, &obj)
	if err != nil {
		reason := reasonOf(err)
		if obj.DeletionTimestamp != nil && obj.Status.UUID == "" && reason != ReasonMagnumUnreachable {
			// Nothing was ever created with it: nothing to wait for.
			return reconcile.Result{}, r.forget(ctx, &obj)
		}
		log.Info("cannot act for the object", "reason", reason, "error", err)
		if perr := r.patchStatus(ctx, &obj, KnownStatus(&obj, reason, err.Error())); perr != nil {
			return reconcile.Result{}, perr
		}
		return reconcile.Result{RequeueAfter: retryCredential}, nil
	}
	if at, ok := r.created.Load(obj.UID); ok && obj.Status.UUID == "" && time.Since(at.(time.Time)) < CreateGrace {
		return reconcile.Result{RequeueAfter: time.Second}, nil // the cache lags behind the create's status
	}
	m, err := api.Observe(ctx, &obj)
	if err != nil {
		return r.failed(ctx, log, &obj, key, err)
	}
	act, drift := Decide(&obj, m, time.Now())
	view := &obj
	switch act.Kind {
	case ActForget:
		log.Info("the cluster is gone from Magnum: the object goes too", "uuid", obj.Status.UUID)
		return reconcile.Result{}, r.forget(ctx, &obj)
	case ActNone:
	default:
		log.Info("asking magnum-api", "action", string(act.Kind), "nodegroup", act.NodeGroup, "why", act.Why)
		if act.Kind == ActCreate {
			// Recorded first: a create whose answer is lost (a restart) is not requested again at once.
			st := KnownStatus(&obj, ReasonCreateRequested, "create requested from magnum-api at "+time.Now().UTC().Format(time.RFC3339))
			if err := r.patchStatus(ctx, &obj, st); err != nil {
				return reconcile.Result{}, err
			}
		}
		uuid, err := api.Do(ctx, &obj, m, act)
		var auth *AuthError
		var refused *RefusedError
		if err != nil && act.Kind == ActCreate && !errors.As(err, &auth) && !errors.As(err, &refused) {
			// No answer: the create may have been taken. CreateRequested stands until the cluster
			// shows under its name or the grace ends.
			log.Warn("magnum-api did not answer the create", "error", err)
			return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
		}
		if err != nil {
			return r.failed(ctx, log, &obj, key, err)
		}
		if uuid != "" {
			// On a copy: obj stays what the status patch is computed against.
			view = obj.DeepCopy()
			view.Status.UUID = uuid
			r.created.Store(obj.UID, time.Now())
		}
		// What the request started (an *_IN_PROGRESS), shown at once.
		if seen, err := api.Observe(ctx, view); err == nil {
			m = seen
			_, drift = Decide(view, m, time.Now())
		}
	}
	if err := r.patchStatus(ctx, &obj, StatusOf(view, m, drift)); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// failed records a refused or failed request in the status; refusals wait for the tenant (or the
// resync), other errors are retried with the queue's backoff.
func (r *Reconciler) failed(ctx context.Context, log *slog.Logger, obj *v1alpha1.MagnumCluster, key string, err error) (reconcile.Result, error) {
	reason := reasonOf(err)
	if reason == ReasonCredentialRejected {
		r.Clients.Forget(key)
	}
	log.Info("magnum-api did not do what the object asks", "reason", reason, "error", err)
	if perr := r.patchStatus(ctx, obj, KnownStatus(obj, reason, err.Error())); perr != nil {
		return reconcile.Result{}, perr
	}
	if reason == ReasonMagnumUnreachable {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: retryCredential}, nil
}

var errCredential = errors.New("credential")

// reasonOf is the Ready reason of a reconcile that failed with err.
func reasonOf(err error) string {
	var auth *AuthError
	var refused *RefusedError
	switch {
	case errors.As(err, &auth):
		return ReasonCredentialRejected
	case errors.Is(err, errCredential):
		return ReasonCredentialMissing
	case errors.As(err, &refused):
		return ReasonMagnumRefused
	}
	return ReasonMagnumUnreachable
}

// api is magnum-api with the object's credential, and the credential's cache key.
func (r *Reconciler) api(ctx context.Context, obj *v1alpha1.MagnumCluster) (*API, string, error) {
	ref := obj.Spec.CredentialsRef
	cloud := ref.CloudName
	if cloud == "" {
		cloud = "openstack"
	}
	var s corev1.Secret
	if err := r.Direct.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("%w: Secret %s (spec.credentialsRef.name) does not exist in namespace %s", errCredential, ref.Name, obj.Namespace)
		}
		return nil, "", err
	}
	if s.Type != SecretType {
		return nil, "", fmt.Errorf("%w: Secret %s is of type %s, not %s", errCredential, ref.Name, s.Type, SecretType)
	}
	cred, err := CredentialFromCloudsYAML(s.Data[CloudsYAMLKey], cloud)
	if err != nil {
		return nil, "", fmt.Errorf("%w: Secret %s: %v", errCredential, ref.Name, err)
	}
	key := obj.Namespace + "/" + ref.Name + "/" + cloud + "@" + s.ResourceVersion
	api, err := r.Clients.For(ctx, key, cred)
	if err != nil {
		return nil, key, err
	}
	if project := strings.TrimPrefix(obj.Namespace, r.NamespacePrefix); api.ProjectID != project {
		r.Clients.Forget(key)
		return nil, key, &AuthError{Message: fmt.Sprintf("Keystone: %s is of project %s, not of this namespace's project %s", cred, api.ProjectID, project)}
	}
	return api, key, nil
}

// forget releases the finalizer.
func (r *Reconciler) forget(ctx context.Context, obj *v1alpha1.MagnumCluster) error {
	patch := client.MergeFrom(obj.DeepCopy())
	if !controllerutil.RemoveFinalizer(obj, Finalizer) {
		return nil
	}
	return client.IgnoreNotFound(r.Direct.Patch(ctx, obj, patch))
}

// patchStatus writes the status when it changed.
func (r *Reconciler) patchStatus(ctx context.Context, obj *v1alpha1.MagnumCluster, st v1alpha1.MagnumClusterStatus) error {
	if equality.Semantic.DeepEqual(obj.Status, st) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopy())
	obj.Status = st
	return client.IgnoreNotFound(r.Direct.Status().Patch(ctx, obj, patch))
}
