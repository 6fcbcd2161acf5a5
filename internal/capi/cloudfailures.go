package capi

import (
	"context"
	"fmt"
	"sort"
	"time"

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

// CloudFailures lists what the cloud refused for a CAPI cluster on OpenStack: "<Kind> <name>:
// <message>" for each condition CAPO marked False with severity Error. Kinds the apiserver does not
// serve (no CAPO) give nothing. It is called on every status sync of a cluster in progress on
// OpenStack — CAPI rewrites a provisioning cluster's conditions a few times a minute — so it reads
// from the manager's informers (started on first use; no request to the apiserver per sync). If
// they cannot sync (the ServiceAccount may list but not watch CAPO's objects: an older RBAC), it
// reads straight from the apiserver from then on.
func (c *Client) CloudFailures(ctx context.Context, namespace, clusterName string) ([]string, error) {
	var out []string
	for _, gvk := range capoObjects {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		err := c.listCAPO(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})
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

// cloudCacheSyncTimeout bounds the first read of CAPO's objects through the informers.
const cloudCacheSyncTimeout = 10 * time.Second

func (c *Client) listCAPO(ctx context.Context, list *unstructured.UnstructuredList, opts ...client.ListOption) error {
	if c.cloudCache == nil || c.cloudCacheBroken.Load() {
		return c.List(ctx, list, opts...)
	}
	cctx, cancel := context.WithTimeout(ctx, cloudCacheSyncTimeout)
	defer cancel()
	err := c.cloudCache.List(cctx, list, opts...)
	if err == nil || meta.IsNoMatchError(err) || ctx.Err() != nil {
		return err
	}
	if c.cloudCacheBroken.CompareAndSwap(false, true) && c.Log != nil {
		c.Log.Warn("CAPO's objects cannot be watched (does the bridge's role allow watch on openstackclusters and openstackservers?); reading them from the apiserver on every status sync", "error", err)
	}
	return c.List(ctx, list, opts...)
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
