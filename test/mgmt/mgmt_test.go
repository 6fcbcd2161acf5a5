// Package mgmt_test checks the local management cluster (deploy/local/mgmt-up.sh) end to end, the
// way the service uses it: a topology Cluster on the in-memory ClusterClass is created through the
// typed v1beta2 API, becomes Available, serves its nodes through the generated kubeconfig, and
// leaves nothing behind once it and its namespace are deleted.
//
//	deploy/local/mgmt-up.sh && go test -tags e2e -v -count=1 ./test/mgmt/
//
// MCB_KUBECONFIG names the management cluster's kubeconfig (default
// /var/lib/magnum-capi-bridge/mgmt/admin.kubeconfig). They are the e2e tier: skipped without the
// `e2e` build tag; with it, a management cluster that is not up is a test failure, not a skip.
package mgmt_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

const (
	availableTimeout = 5 * time.Minute
	deletionTimeout  = 2 * time.Minute
)

// managementCluster returns a REST config for the local management cluster.
func managementCluster(t *testing.T) *rest.Config {
	_, cfg := testutil.ManagementCluster(t)
	// That inventory also lists deprecated types (v1 Endpoints), and every such list would print a
	// deprecation warning.
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	return cfg
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// stackVersion reads one KEY=VALUE of deploy/local/versions.env, the single place versions are pinned.
func stackVersion(t *testing.T, key string) string {
	t.Helper()
	path := filepath.Join(testutil.RepoRoot(), "deploy", "local", "versions.env")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && k == key {
			return strings.Trim(v, `"'`)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("%s: no %s", path, key)
	return ""
}

func TestTopologyClusterLifecycle(t *testing.T) {
	cfg := managementCluster(t)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: newScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	version := stackVersion(t, "DEFAULT_WORKLOAD_K8S_VERSION")
	// Bounded below go test's default 10 min timeout, so a hang ends as a readable test failure.
	ctx, cancel := context.WithTimeout(context.Background(), availableTimeout+2*deletionTimeout)
	defer cancel()

	ns := "mgmt-e2e-" + testutil.RandomHex(3)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	namespaceDeleted := false
	t.Cleanup(func() {
		if namespaceDeleted {
			return
		}
		// A failed run must not leave its cluster behind: deleting the namespace deletes it too.
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		_ = c.Delete(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	classObjects := applyClusterClass(ctx, t, c, ns, filepath.Join(testutil.RepoRoot(), "deploy", "local", "inmemory", "clusterclass.yaml"))
	baseline := namespaceObjects(ctx, t, c, cfg, ns)
	// The inventory must see exactly what was applied, CRD-backed kinds included; otherwise the
	// leftover check after deletion could pass by seeing nothing.
	if extra, missing := difference(baseline, classObjects), difference(classObjects, baseline); len(extra)+len(missing) > 0 {
		t.Fatalf("namespace inventory after applying the ClusterClass: unexpected %v, missing %v", extra, missing)
	}
	t.Logf("namespace %s: applied ClusterClass in-memory (%d objects)", ns, len(classObjects))

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e", Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{"10.128.0.0/12"}},
				ServiceDomain: "cluster.local",
			},
			Topology: clusterv1.Topology{
				ClassRef:     clusterv1.ClusterClassRef{Name: "in-memory"},
				Version:      version,
				ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
				Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
					{Class: "default-worker", Name: "md-0", Replicas: ptr.To[int32](1)},
				}},
			},
		},
	}
	key := client.ObjectKeyFromObject(cluster)
	created := time.Now()
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatalf("create Cluster: %v", err)
	}

	var last *clusterv1.Cluster
	err = waitForCluster(ctx, c, key, availableTimeout, func(cl *clusterv1.Cluster) bool {
		last = cl
		return cl != nil && meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.AvailableCondition)
	})
	if err != nil {
		t.Fatalf("Cluster %s not Available after %s: %v\nconditions: %s", key, time.Since(created).Round(time.Second), err, describeConditions(last))
	}
	available := time.Since(created)
	t.Logf("Cluster %s Available after %s (Kubernetes %s, control-plane endpoint %s:%d)",
		key, available.Round(time.Millisecond), version, last.Spec.ControlPlaneEndpoint.Host, last.Spec.ControlPlaneEndpoint.Port)

	nodes := workloadNodes(ctx, t, c, key)
	if len(nodes) != 2 {
		t.Fatalf("workload cluster has %d nodes %v, want 2 (1 control plane + 1 worker)", len(nodes), nodes)
	}
	t.Logf("workload cluster nodes: %s", strings.Join(nodes, ", "))

	owned := namespaceObjects(ctx, t, c, cfg, ns)
	machines := 0
	for _, o := range owned {
		if strings.HasPrefix(o, "Machine.cluster.x-k8s.io/") {
			machines++
		}
	}
	if kubeconfig := "Secret/" + key.Name + "-kubeconfig"; machines != 2 || !slices.Contains(owned, kubeconfig) {
		t.Fatalf("namespace inventory with the cluster up: %d Machines (want 2), %s present = %v; inventory: %v",
			machines, kubeconfig, slices.Contains(owned, kubeconfig), owned)
	}
	t.Logf("cluster created %d objects in the namespace", len(owned)-len(baseline))

	deleteStart := time.Now()
	if err := c.Delete(ctx, cluster); err != nil {
		t.Fatalf("delete Cluster: %v", err)
	}
	if err := waitForCluster(ctx, c, key, deletionTimeout, func(cl *clusterv1.Cluster) bool { return cl == nil }); err != nil {
		t.Fatalf("Cluster %s still exists %s after deletion: %v", key, time.Since(deleteStart).Round(time.Second), err)
	}
	clusterGone := time.Since(deleteStart)
	// Secrets and other objects are collected by ownerReference garbage collection, which can lag
	// behind the Cluster itself: wait until the namespace is back to what the test put there.
	var leftovers []string
	deadline := time.Now().Add(deletionTimeout)
	for {
		leftovers = difference(namespaceObjects(ctx, t, c, cfg, ns), baseline)
		if len(leftovers) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(leftovers) != 0 {
		t.Fatalf("%s after deleting the Cluster, these of its objects remain: %s", deletionTimeout, strings.Join(leftovers, ", "))
	}
	t.Logf("Cluster deleted after %s; all %d of its objects gone after %s",
		clusterGone.Round(time.Millisecond), len(owned)-len(baseline), time.Since(deleteStart).Round(time.Millisecond))

	nsStart := time.Now()
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	namespaceDeleted = true
	if err := waitGone(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, deletionTimeout); err != nil {
		t.Fatalf("namespace %s not gone: %v", ns, err)
	}
	t.Logf("namespace %s gone after %s", ns, time.Since(nsStart).Round(time.Millisecond))
}

// workloadNodes lists the workload cluster's nodes through the kubeconfig CAPI generated for it.
func workloadNodes(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) []string {
	t.Helper()
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-kubeconfig"}, &secret); err != nil {
		t.Fatalf("workload kubeconfig secret: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		t.Fatalf("workload kubeconfig in secret %s-kubeconfig: %v", key.Name, err)
	}
	cfg.Timeout = 10 * time.Second
	wc, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := wc.List(ctx, &nodes); err != nil {
		t.Fatalf("list workload cluster nodes at %s: %v", cfg.Host, err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names
}

func describeConditions(cl *clusterv1.Cluster) string {
	if cl == nil {
		return "(Cluster not seen)"
	}
	var parts []string
	for _, cond := range cl.Status.Conditions {
		s := cond.Type + "=" + string(cond.Status)
		if cond.Status != metav1.ConditionTrue && cond.Message != "" {
			s += " (" + strings.ReplaceAll(cond.Message, "\n", " ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// waitForCluster follows the Cluster with a watch until done says so; done gets nil once the
// Cluster does not exist. A closed or failed watch is re-established from a fresh list.
func waitForCluster(ctx context.Context, c client.WithWatch, key client.ObjectKey, timeout time.Duration, done func(*clusterv1.Cluster) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := func(rv string) *client.ListOptions {
		o := &client.ListOptions{Namespace: key.Namespace, Raw: &metav1.ListOptions{ResourceVersion: rv}}
		client.MatchingFields{"metadata.name": key.Name}.ApplyToList(o)
		return o
	}
	for {
		var list clusterv1.ClusterList
		if err := c.List(ctx, &list, opts("")); err != nil {
			return err
		}
		var current *clusterv1.Cluster
		if len(list.Items) > 0 {
			current = &list.Items[0]
		}
		if done(current) {
			return nil
		}
		w, err := c.Watch(ctx, &clusterv1.ClusterList{}, opts(list.ResourceVersion))
		if err != nil {
			return err
		}
		if finished, err := followWatch(ctx, w.ResultChan(), done); finished || err != nil {
			w.Stop()
			return err
		}
		w.Stop()
	}
}

func followWatch(ctx context.Context, events <-chan watch.Event, done func(*clusterv1.Cluster) bool) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-events:
			if !ok {
				return false, nil // watch closed by the server: list again
			}
			cl, isCluster := ev.Object.(*clusterv1.Cluster)
			switch {
			case ev.Type == watch.Deleted && isCluster:
				if done(nil) {
					return true, nil
				}
			case isCluster:
				if done(cl) {
					return true, nil
				}
			default:
				return false, nil // an Error event (e.g. resource version too old): list again
			}
		}
	}
}

// waitGone polls until the object's Get returns NotFound.
func waitGone(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still there after %s (phase %v)", timeout, describePhase(obj))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func describePhase(obj client.Object) string {
	if ns, ok := obj.(*corev1.Namespace); ok {
		var conds []string
		for _, c := range ns.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				conds = append(conds, fmt.Sprintf("%s: %s", c.Type, c.Message))
			}
		}
		return fmt.Sprintf("%s %v", ns.Status.Phase, conds)
	}
	return "unknown"
}

func difference(now, baseline []string) []string {
	seen := map[string]bool{}
	for _, b := range baseline {
		seen[b] = true
	}
	var out []string
	for _, n := range now {
		if !seen[n] {
			out = append(out, n)
		}
	}
	return out
}
