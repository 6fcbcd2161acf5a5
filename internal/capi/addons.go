package capi

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

var resourceSetGVK = addonsv1.GroupVersion.WithKind("ClusterResourceSet")

// ApplyAddons delivers a cluster's add-on set through its ClusterResourceSet. A ClusterResourceSet
// never removes what it applied, so the objects the live set lists (its inventory annotation) and
// the new one does not are first deleted from the workload cluster; only then is the new set
// applied, so a failed prune is retried with the same inventory. Without prune (a create: no set
// before it, or the same set applied by an earlier delivery) the live set is not read.
func (c *Client) ApplyAddons(ctx context.Context, clusterName string, set *addons.Set, prune bool) error {
	if !prune {
		return c.Apply(ctx, set.Secret, set.ResourceSet)
	}
	ns, name := set.ResourceSet.GetNamespace(), set.ResourceSet.GetName()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(resourceSetGVK)
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read the add-on set %s/%s: %w", ns, name, err)
	default:
		var before []addons.ObjectRef
		if raw := live.GetAnnotations()[addons.AnnotationInventory]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &before); err != nil {
				return fmt.Errorf("the add-on set %s/%s has an unreadable %s: %w", ns, name, addons.AnnotationInventory, err)
			}
		}
		if gone := removed(before, set.Inventory); len(gone) > 0 {
			if err := c.pruneWorkload(ctx, ns, clusterName, gone); err != nil {
				return err
			}
		}
	}
	return c.Apply(ctx, set.Secret, set.ResourceSet)
}

// removed lists the refs of before that after no longer has.
func removed(before, after []addons.ObjectRef) []addons.ObjectRef {
	keep := map[addons.ObjectRef]bool{}
	for _, r := range after {
		keep[r] = true
	}
	var out []addons.ObjectRef
	for _, r := range before {
		if !keep[r] {
			out = append(out, r)
		}
	}
	return out
}

// pruneWorkload deletes objects from the workload cluster, reached with the admin kubeconfig CAPI
// keeps in <cluster>-kubeconfig. Without that Secret the workload cluster was never initialized, so
// the set delivered nothing there.
func (c *Client) pruneWorkload(ctx context.Context, namespace, clusterName string, refs []addons.ObjectRef) error {
	data, found, err := c.ReadSecret(ctx, namespace, clusterName+"-kubeconfig")
	if err != nil {
		return err
	}
	if !found {
		return nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data["value"])
	if err != nil {
		return fmt.Errorf("the kubeconfig of workload cluster %s is unreadable: %w", clusterName, err)
	}
	cfg.Timeout = 30 * time.Second
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, r := range refs {
		ri := dyn.Resource(r.GroupVersionResource())
		var err error
		if r.Namespace != "" {
			err = ri.Namespace(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		} else {
			err = ri.Delete(ctx, r.Name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("remove add-on object %s from workload cluster %s: %w", r, clusterName, err)
		}
	}
	return nil
}

// DeleteAddons removes a deleted cluster's ClusterResourceSets (its resource-set Secret goes with
// the cluster's other Secrets, by the same label). CAPI removes the set from its bindings.
func (c *Client) DeleteAddons(ctx context.Context, namespace, clusterUUID string) error {
	list := &unstructured.Unstructured{}
	list.SetGroupVersionKind(resourceSetGVK)
	return client.IgnoreNotFound(c.DeleteAllOf(ctx, list, client.InNamespace(namespace),
		client.MatchingLabels{templates.LabelClusterUUID: clusterUUID}))
}
