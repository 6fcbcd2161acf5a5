package capi

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// capoObjects are the CAPO v0.14 objects whose conditions carry the cloud's refusals: a network or
// security group the cluster could not get (OpenStackCluster), a server Nova would not create
// (OpenStackServer, e.g. "Quota exceeded for instances"). The OpenStackMachine in front of a
// server keeps saying it waits for its bootstrap data, and the Machine mirrors that.
var capoObjects = []schema.GroupVersionKind{
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: "OpenStackClusterList"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "OpenStackServerList"},
}

// CloudFailures lists what the cloud refused for a CAPI cluster on OpenStack, read straight from
// the apiserver (the bridge caches none of CAPO's objects): "<Kind> <name>: <message>" for each
// condition CAPO marked False with severity Error. Kinds the apiserver does not serve (no CAPO)
// give nothing.
func (c *Client) CloudFailures(ctx context.Context, namespace, clusterName string) ([]string, error) {
	var out []string
	for _, gvk := range capoObjects {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})
		if err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		for _, o := range list.Items {
			out = append(out, cloudFailuresOf(&o)...)
		}
	}
	sort.Strings(out)
	return out, nil
}

// cloudFailuresOf reads CAPO's (Cluster API v1beta1-style) conditions: False with severity Error.
func cloudFailuresOf(o *unstructured.Unstructured) []string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	seen := map[string]bool{}
	var out []string
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["status"] != "False" || m["severity"] != "Error" {
			continue
		}
		msg, _ := m["message"].(string)
		if msg == "" || seen[msg] {
			continue
		}
		seen[msg] = true
		out = append(out, fmt.Sprintf("%s %s: %s", o.GetKind(), o.GetName(), oneLine(msg)))
	}
	return out
}
