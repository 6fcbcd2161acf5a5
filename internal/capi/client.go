package capi

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// FieldManager is the server-side apply field manager of everything the bridge writes.
const FieldManager = "magnum-capi-bridge"

// NewScheme knows the core Kubernetes types and Cluster API's core types.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := clusterv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := addonsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// RESTConfig loads a kubeconfig file; an empty path means in-cluster configuration.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("[bridge] kubeconfig is empty and %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("management cluster kubeconfig %s: %w", kubeconfig, err)
	}
	// client-go's defaults (5 requests/s, bursts of 10) throttle a create's dozen applies.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Client writes to the management cluster.
type Client struct {
	client.Client
	// NamespaceQuota is the ResourceQuota of every project namespace ([bridge] namespace_quota);
	// nil means DefaultNamespaceQuota.
	NamespaceQuota corev1.ResourceList
	// ProjectViewers binds ProjectViewerRole to the project's Keystone group in every project
	// namespace ([bridge] tenant_view).
	ProjectViewers bool
	// ProjectEditors binds ProjectEditorRole to the group of the project's members in every
	// project namespace ([bridge] tenant_api).
	ProjectEditors bool
	self           selfSubject
	applied        appliedCache
	// cloudCache serves CloudFailures from informers (the manager's cache); nil: the apiserver.
	cloudCache       client.Reader
	cloudCacheBroken atomic.Bool
	// machineSetsForbidden: the bridge's role does not list MachineSets (warned once).
	machineSetsForbidden atomic.Bool
	// Log, when set, receives what the client notices but does not fail on.
	Log *slog.Logger
}

// Apply server-side-applies objects in order under the bridge's field manager.
func (c *Client) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			ns := o.GetNamespace()
			if o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" {
				ns = o.GetName()
			}
			c.applied.forget(ns) // what was applied there may be gone: the retry applies it all again
			return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// DryRunApply asks the apiserver, its validation and the providers' admission webhooks whether they
// would accept the objects, without changing anything.
func (c *Client) DryRunApply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
			return fmt.Errorf("dry run %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// MarkMachinesForDeletion annotates the named machines of a node group with CAPI's delete-machine
// annotation, so the next scale-down removes exactly them. A name matches a machine's name, its
// node's name or the tail of its provider id (what OpenStack users know as the server).
func (c *Client) MarkMachinesForDeletion(ctx context.Context, namespace, clusterName, nodeGroupUUID string, names []string) ([]string, error) {
	var machines clusterv1.MachineList
	if err := c.List(ctx, &machines, client.InNamespace(namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel: clusterName, templates.LabelNodeGroupUUID: nodeGroupUUID}); err != nil {
		return nil, err
	}
	var unknown []string
	var marked []*clusterv1.Machine
	for _, name := range names {
		var hit *clusterv1.Machine
		for i := range machines.Items {
			m := &machines.Items[i]
			if m.Name == name || m.Status.NodeRef.Name == name || (m.Spec.ProviderID != "" && strings.HasSuffix(m.Spec.ProviderID, "/"+name)) {
				hit = m
				break
			}
		}
		if hit == nil {
			unknown = append(unknown, name)
			continue
		}
		marked = append(marked, hit)
	}
	if len(unknown) > 0 {
		return unknown, nil
	}
	for _, m := range marked {
		patch := client.MergeFrom(m.DeepCopy())
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[clusterv1.DeleteMachineAnnotation] = "yes"
		if err := c.Patch(ctx, m, patch); err != nil {
			return nil, fmt.Errorf("mark machine %s for deletion: %w", m.Name, err)
		}
	}
	return nil, nil
}

// ApplyClusterSecrets writes the certificate secrets CAPI's control plane uses instead of generating
// its own, so that certificates Magnum signs are trusted by the cluster.
func (c *Client) ApplyClusterSecrets(ctx context.Context, namespace, clusterUUID string, secrets []certs.CAPISecret) error {
	// All at once: they are independent, and they stand between a create's cast and its Cluster.
	objs := make([]*unstructured.Unstructured, 0, len(secrets))
	for _, s := range secrets {
		sec := &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{
				Name: s.Name, Namespace: namespace,
				Labels: templates.MergeLabels(s.Labels, map[string]string{templates.LabelClusterUUID: clusterUUID,
					templates.LabelManagedBy: templates.ManagedByValue}),
			},
			Type: corev1.SecretType(s.Type),
			Data: s.Data,
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sec)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		objs = append(objs, u)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, u := range objs {
		g.Go(func() error { return c.Apply(gctx, u) })
	}
	return g.Wait()
}

// GetCluster reads a Cluster from the apiserver (the client reads through no cache: an apply
// built on a stale Cluster could undo what the previous one changed).
func (c *Client) GetCluster(ctx context.Context, namespace, name string) (*clusterv1.Cluster, bool, error) {
	var cl clusterv1.Cluster
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cl)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &cl, true, nil
}

// DeleteCluster asks CAPI to delete a cluster; it returns true when the Cluster is already gone.
func (c *Client) DeleteCluster(ctx context.Context, namespace, name string) (gone bool, err error) {
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err = c.Delete(ctx, cl, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// DeleteClusterSecrets removes what the bridge wrote for a cluster once CAPI has finished.
func (c *Client) DeleteClusterSecrets(ctx context.Context, namespace, clusterUUID string) error {
	return client.IgnoreNotFound(c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(namespace),
		client.MatchingLabels{templates.LabelClusterUUID: clusterUUID}))
}
