package capi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// TestNodeLabelsAndTaintsReachTheNodes applies the in-memory rendering of a cluster whose worker
// node group has Magnum 23 node labels and taints to the real management cluster, and reads the
// workload cluster's Nodes through the kubeconfig CAPI wrote: the group's Nodes carry exactly those
// labels and taints, other Nodes none of them. Changing them (nodegroup_update) changes the Nodes in
// place, without replacing a machine. The cluster is rendered with an upgrade's max_batch_size, and
// its MachineDeployments carry the rolling update that asks for.
func TestNodeLabelsAndTaintsReachTheNodes(t *testing.T) {
	kc := managementCluster(t)
	cfg, err := RESTConfig(kc)
	require.NoError(t, err)
	scheme, err := NewScheme()
	require.NoError(t, err)
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	c := &Client{Client: direct}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	project := "capitest" + hex.EncodeToString(b)
	ns := templates.NamespaceFor("mcb-", project)
	const poolUUID = "33333333-3333-3333-3333-333333333333"
	in := templates.Input{
		Flavor: templates.FlavorInMemory, Namespace: ns, DefaultKubernetesVersion: "v1.36.3",
		Template: templates.Template{UUID: "d7c6cbe4-3a63-447f-88de-1ab09044b177", ImageID: "ubuntu-2404-kube-v1.36.3"},
		Cluster:  templates.Cluster{UUID: "bd71db63-28f3-4ac5-8e6e-" + hex.EncodeToString(append(b, 0, 0)), Name: "nodes-test", ProjectID: project},
		NodeGroups: []templates.NodeGroup{
			{UUID: "11111111-1111-1111-1111-111111111111", Name: "default-master", Role: "master", NodeCount: 1, IsDefault: true},
			{UUID: "22222222-2222-2222-2222-222222222222", Name: "default-worker", Role: "worker", NodeCount: 1, IsDefault: true},
			{UUID: poolUUID, Name: "pool", Role: "worker", NodeCount: 2,
				NodeLabels: map[string]string{"example.com/team": "blue", "tier": "batch"},
				NodeTaints: []templates.Taint{{Key: "example.com/dedicated", Value: "gpu", Effect: "NoSchedule"},
					{Key: "example.com/evict", Effect: "NoExecute"}}},
		},
		Upgrade: &templates.Upgrade{MaxBatchSize: 2, NodeGroup: "22222222-2222-2222-2222-222222222222"},
	}
	r, err := templates.Render(in)
	require.NoError(t, err)
	name := r.Cluster.GetName()

	require.NoError(t, c.EnsureProjectNamespace(ctx, ns, project))
	t.Cleanup(func() {
		// Delete the Cluster first and wait, so CAPI's finalizers run while the namespace is there.
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		for {
			gone, err := c.DeleteCluster(cctx, ns, name)
			if gone || err != nil || cctx.Err() != nil {
				break
			}
			time.Sleep(time.Second)
		}
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	require.NoError(t, c.Apply(ctx, r.ClassObjects...))
	require.NoError(t, c.Apply(ctx, r.Cluster))

	// The MachineDeployments CAPI's topology controller made roll max_batch_size machines at a time.
	for _, md := range []string{"default-worker", "pool"} {
		waitFor(ctx, t, "MachineDeployment "+md+" with the upgrade's rolling update", func() (bool, string) {
			var list clusterv1.MachineDeploymentList
			if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{
				clusterv1.ClusterNameLabel: name, clusterv1.ClusterTopologyMachineDeploymentNameLabel: md}); err != nil || len(list.Items) != 1 {
				return false, fmt.Sprintf("%d MachineDeployments, err %v", len(list.Items), err)
			}
			s := list.Items[0].Spec.Rollout.Strategy
			got := fmt.Sprintf("%s surge %v unavailable %v", s.Type, s.RollingUpdate.MaxSurge, s.RollingUpdate.MaxUnavailable)
			return got == "RollingUpdate surge 2 unavailable 0", got
		})
	}

	wc := workloadClient(ctx, t, c, ns, name)
	pool := func() []string { return machineNodes(ctx, t, c, ns, name, "pool") }
	check := func(what string, labels map[string]string, absent []string, taints []string) {
		t.Helper()
		waitFor(ctx, t, what, func() (bool, string) {
			names := pool()
			if len(names) != 2 {
				return false, fmt.Sprintf("pool has nodes %v", names)
			}
			for _, n := range names {
				var node corev1.Node
				if err := wc.Get(ctx, client.ObjectKey{Name: n}, &node); err != nil {
					return false, err.Error()
				}
				for k, v := range labels {
					if got, ok := node.Labels[k]; !ok || got != v {
						return false, fmt.Sprintf("node %s labels %v", n, node.Labels)
					}
				}
				for _, k := range absent {
					if _, ok := node.Labels[k]; ok {
						return false, fmt.Sprintf("node %s still has label %s", n, k)
					}
				}
				if got := tenantTaints(node); strings.Join(got, " ") != strings.Join(taints, " ") {
					return false, fmt.Sprintf("node %s taints %v", n, got)
				}
			}
			return true, ""
		})
	}
	check("the pool's Nodes carry its node labels and taints",
		map[string]string{"example.com/team": "blue", "tier": "batch"}, nil,
		[]string{"example.com/dedicated=gpu:NoSchedule", "example.com/evict:NoExecute"})
	before := pool()

	// Nodes of the other groups carry none of them. The default worker's node may join after the
	// pool's (seen under load): wait for all four.
	var nodes corev1.NodeList
	waitFor(ctx, t, "1 control plane + 1 default worker + 2 pool nodes", func() (bool, string) {
		if err := wc.List(ctx, &nodes); err != nil {
			return false, err.Error()
		}
		return len(nodes.Items) == 4, fmt.Sprintf("%d nodes", len(nodes.Items))
	})
	for _, n := range nodes.Items {
		if slices.Contains(before, n.Name) {
			continue
		}
		require.NotContains(t, n.Labels, "example.com/team", n.Name)
		require.NotContains(t, n.Labels, "tier", n.Name)
		require.Empty(t, tenantTaints(n), n.Name)
	}

	// nodegroup_update: a label changed, one removed, one added; a taint's value changed, one removed.
	in.Upgrade = nil
	in.NodeGroups[2].NodeLabels = map[string]string{"example.com/team": "red", "example.com/new": "1"}
	in.NodeGroups[2].NodeTaints = []templates.Taint{{Key: "example.com/dedicated", Value: "tpu", Effect: "NoSchedule"}}
	r, err = templates.Render(in)
	require.NoError(t, err)
	require.NoError(t, c.Apply(ctx, r.Cluster))
	check("the pool's Nodes follow the node group's update",
		map[string]string{"example.com/team": "red", "example.com/new": "1"}, []string{"tier"},
		[]string{"example.com/dedicated=tpu:NoSchedule"})
	require.Equal(t, before, pool(), "labels and taints change in place: no machine was replaced")
}

// waitFor polls cond until it holds, failing with its last explanation when ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	last := ""
	for {
		ok, why := cond()
		if ok {
			t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		last = why
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not after %s; last seen: %s", what, time.Since(start).Round(time.Second), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// workloadClient reads the workload cluster through the kubeconfig CAPI wrote for it.
func workloadClient(ctx context.Context, t *testing.T, c *Client, ns, name string) client.Client {
	t.Helper()
	var secret corev1.Secret
	waitFor(ctx, t, "workload kubeconfig", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, &secret)
		if apierrors.IsNotFound(err) {
			return false, "no secret yet"
		}
		require.NoError(t, err)
		return true, ""
	})
	wcfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	require.NoError(t, err)
	wcfg.Timeout = 10 * time.Second
	wc, err := client.New(wcfg, client.Options{Scheme: clientgoscheme.Scheme})
	require.NoError(t, err)
	return wc
}

// machineNodes are the Node names of a MachineDeployment topology's Machines, sorted; Machines
// without a Node yet are left out.
func machineNodes(ctx context.Context, t *testing.T, c *Client, ns, cluster, md string) []string {
	t.Helper()
	var machines clusterv1.MachineList
	require.NoError(t, c.List(ctx, &machines, client.InNamespace(ns), client.MatchingLabels{
		clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: md}))
	var out []string
	for _, m := range machines.Items {
		if m.Status.NodeRef.IsDefined() {
			out = append(out, m.Status.NodeRef.Name)
		}
	}
	sort.Strings(out)
	return out
}

// tenantTaints are a Node's example.com/ taints as key[=value]:Effect, sorted.
func tenantTaints(n corev1.Node) []string {
	var out []string
	for _, tt := range n.Spec.Taints {
		if !strings.HasPrefix(tt.Key, "example.com/") {
			continue
		}
		s := tt.Key
		if tt.Value != "" {
			s += "=" + tt.Value
		}
		out = append(out, s+":"+string(tt.Effect))
	}
	sort.Strings(out)
	return out
}
