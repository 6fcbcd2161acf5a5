package capi

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// ApplyAutoscaler applies a cluster's cluster-autoscaler (internal/autoscaler), its Deployment
// last: the Pod starts only once its ServiceAccount may do what the autoscaler does.
func (c *Client) ApplyAutoscaler(ctx context.Context, o *autoscaler.Objects) error {
	for _, obj := range []runtime.Object{o.ServiceAccount, o.Role, o.RoleBinding, o.Deployment} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		// A typed object carries an empty status and a null creationTimestamp, neither of which
		// the bridge means to own.
		delete(u, "status")
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u, "spec", "template", "metadata", "creationTimestamp")
		if err := c.Apply(ctx, &unstructured.Unstructured{Object: u}); err != nil {
			return err
		}
	}
	return nil
}

// DeleteAutoscaler removes a cluster's cluster-autoscaler: the Deployment first, so that nothing
// scales the cluster while its rights go.
func (c *Client) DeleteAutoscaler(ctx context.Context, namespace, clusterUUID string) error {
	selector := client.MatchingLabels{templates.LabelClusterUUID: clusterUUID, "app.kubernetes.io/component": autoscaler.Component}
	for _, kind := range []struct {
		name string
		obj  client.Object
	}{{"Deployment", &appsv1.Deployment{}}, {"RoleBinding", &rbacv1.RoleBinding{}}, {"Role", &rbacv1.Role{}}, {"ServiceAccount", &corev1.ServiceAccount{}}} {
		if err := client.IgnoreNotFound(c.DeleteAllOf(ctx, kind.obj, client.InNamespace(namespace), selector)); err != nil {
			return fmt.Errorf("delete the cluster autoscaler's %s in %s: %w", kind.name, namespace, err)
		}
	}
	return nil
}

// autoscalerOf reads the cluster's autoscaler Deployment from the watch's cache (nil when there is none).
func autoscalerOf(ctx context.Context, r client.Reader, c *clusterv1.Cluster) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: autoscaler.Name(c.Name)}, &d)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &d, nil
}

// autoscalerRights are what the bridge does to run the clusters' autoscalers
// (deploy/kubernetes/rbac.yaml grants them).
var autoscalerRights = []authorizationv1.ResourceAttributes{
	{Group: "apps", Resource: "deployments", Verb: "list"}, {Group: "apps", Resource: "deployments", Verb: "watch"},
	{Group: "apps", Resource: "deployments", Verb: "create"}, {Group: "apps", Resource: "deployments", Verb: "patch"},
	{Group: "apps", Resource: "deployments", Verb: "deletecollection"},
	{Resource: "serviceaccounts", Verb: "create"}, {Resource: "serviceaccounts", Verb: "deletecollection"},
	{Group: "rbac.authorization.k8s.io", Resource: "roles", Verb: "create"},
	{Group: "rbac.authorization.k8s.io", Resource: "roles", Verb: "escalate"},
	{Group: "rbac.authorization.k8s.io", Resource: "roles", Verb: "bind"},
	{Group: "rbac.authorization.k8s.io", Resource: "roles", Verb: "deletecollection"},
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Verb: "deletecollection"},
}

// AutoscalerRights asks the apiserver whether the identity of cfg may run the clusters'
// autoscalers; missing names the rights it lacks (a bridge upgraded before its role was).
func AutoscalerRights(ctx context.Context, cfg *rest.Config) (missing []string, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, a := range autoscalerRights {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking the management cluster what the bridge may do: %w", err)
		}
		if !review.Status.Allowed {
			missing = append(missing, a.Verb+" "+strings.TrimSuffix(a.Resource+"."+a.Group, "."))
		}
	}
	return missing, nil
}
