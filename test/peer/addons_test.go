package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fakeAddonProvider plays azimuth's cluster-api-addon-provider, which nothing here runs, for the
// clusters in the namespaces it serves: magnum-capi-helm reports a cluster complete only once every
// add-on object labelled addons.stackhpc.com/cluster=<release> is Deployed, and the chart's add-ons
// are what makes a workload cluster usable. Like the real provider it labels each HelmRelease and
// Manifests object with its cluster and release, makes the CAPI Cluster its owner, says Pending,
// and says Deployed once the cluster can take it (bootstrap add-ons: control plane initialized;
// others: Cluster Available). It installs nothing into the workload cluster (the simulated ones run
// no pods) but for one effect the cluster cannot complete without: the chart sets no kubelet
// --provider-id and leaves each Node's provider ID to the OpenStack cloud controller manager (its
// ccm-openstack add-on); without one Cluster API never matches a Machine to its Node. So once
// ccm-openstack is Deployed, the fake sets the provider IDs (initializeNodes).
type fakeAddonProvider struct {
	kube   client.WithWatch
	serves func(namespace string) bool
	tb     testing.TB
	events chan addonEvent
	// wg holds every goroutine of the provider: all end before the test does.
	wg sync.WaitGroup

	mu       sync.Mutex
	clusters map[types.NamespacedName]*addonCluster
}

type addonCluster struct {
	uid                    types.UID
	initialized, available bool
	addons                 map[string]*unstructured.Unstructured // by kind/name
	nodeInitializer        context.CancelFunc
}

type addonEvent struct {
	typ watch.EventType
	obj client.Object
}

const (
	addonGroupVersion   = "addons.stackhpc.com/v1alpha1"
	addonClusterLabel   = "addons.stackhpc.com/cluster"
	addonReleaseNSLabel = "addons.stackhpc.com/release-namespace"
	addonReleaseLabel   = "addons.stackhpc.com/release-name"
	addonDeployed       = "Deployed"
	addonPending        = "Pending"
	ccmReleaseName      = "ccm-openstack"
)

// startFakeAddonProvider serves the namespaces of a conductor's prefix until the test ends.
func (e *benchEnv) startFakeAddonProvider(tb testing.TB, namespacePrefix string) *fakeAddonProvider {
	ctx, cancel := context.WithCancel(context.Background())
	p := &fakeAddonProvider{kube: e.kube, tb: tb, events: make(chan addonEvent, 256),
		serves:   func(ns string) bool { return strings.HasPrefix(ns, namespacePrefix) },
		clusters: map[types.NamespacedName]*addonCluster{}}
	for _, kind := range []string{"HelmRelease", "Manifests"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.FromAPIVersionAndKind(addonGroupVersion, kind+"List"))
		p.wg.Go(func() { p.watch(ctx, list) })
	}
	p.wg.Go(func() { p.watch(ctx, &clusterv1.ClusterList{}) })
	p.wg.Go(func() { p.handle(ctx) })
	tb.Cleanup(func() {
		cancel() // the node initializers' contexts derive from it
		p.wg.Wait()
	})
	return p
}

// watch feeds the events of one kind to the handler; a watch started afresh replays every object
// as ADDED, which the handler takes as it takes any other event.
func (p *fakeAddonProvider) watch(ctx context.Context, list client.ObjectList) {
	for ctx.Err() == nil {
		w, err := p.kube.Watch(ctx, list)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok || ev.Type == watch.Error || !p.serves(obj.GetNamespace()) {
				continue
			}
			select {
			case p.events <- addonEvent{ev.Type, obj}:
			case <-ctx.Done():
			}
		}
		w.Stop()
	}
}

func (p *fakeAddonProvider) handle(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-p.events:
			switch obj := ev.obj.(type) {
			case *clusterv1.Cluster:
				p.clusterChanged(ctx, ev.typ, obj)
			case *unstructured.Unstructured:
				p.addonChanged(ctx, ev.typ, obj)
			}
		}
	}
}

func (p *fakeAddonProvider) cluster(key types.NamespacedName) *addonCluster {
	c := p.clusters[key]
	if c == nil {
		c = &addonCluster{addons: map[string]*unstructured.Unstructured{}}
		p.clusters[key] = c
	}
	return c
}

func (p *fakeAddonProvider) clusterChanged(ctx context.Context, typ watch.EventType, cl *clusterv1.Cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := client.ObjectKeyFromObject(cl)
	if typ == watch.Deleted {
		if c := p.clusters[key]; c != nil && c.nodeInitializer != nil {
			c.nodeInitializer()
		}
		delete(p.clusters, key)
		return
	}
	c := p.cluster(key)
	c.uid = cl.UID
	for _, cond := range cl.Status.Conditions {
		switch cond.Type {
		case clusterv1.ClusterControlPlaneInitializedCondition:
			c.initialized = c.initialized || cond.Status == metav1.ConditionTrue
		case clusterv1.AvailableCondition:
			c.available = cond.Status == metav1.ConditionTrue
		}
	}
	for _, a := range c.addons {
		p.reconcile(ctx, key, c, a)
	}
}

func (p *fakeAddonProvider) addonChanged(ctx context.Context, typ watch.EventType, a *unstructured.Unstructured) {
	p.mu.Lock()
	defer p.mu.Unlock()
	clusterName, _, _ := unstructured.NestedString(a.Object, "spec", "clusterName")
	if clusterName == "" {
		return
	}
	key := types.NamespacedName{Namespace: a.GetNamespace(), Name: clusterName}
	c := p.cluster(key)
	id := a.GetKind() + "/" + a.GetName()
	if typ == watch.Deleted {
		delete(c.addons, id)
		return
	}
	c.addons[id] = a
	p.reconcile(ctx, key, c, a)
}

// reconcile brings one add-on object to what the real provider would have made of it by now.
func (p *fakeAddonProvider) reconcile(ctx context.Context, cluster types.NamespacedName, c *addonCluster, a *unstructured.Unstructured) {
	phase, _, _ := unstructured.NestedString(a.Object, "status", "phase")
	patch := map[string]any{}
	if c.uid == "" { // its Cluster not seen yet
		if phase == "" {
			patch["status"] = map[string]any{"phase": addonPending}
		}
	} else {
		release, _, _ := unstructured.NestedString(a.Object, "spec", "releaseName")
		if release == "" {
			release = a.GetName()
		}
		targetNS, _, _ := unstructured.NestedString(a.Object, "spec", "targetNamespace")
		want := map[string]string{addonClusterLabel: cluster.Name, addonReleaseNSLabel: targetNS, addonReleaseLabel: release}
		labels := map[string]any{}
		for k, v := range want {
			if a.GetLabels()[k] != v {
				labels[k] = v
			}
		}
		meta := map[string]any{}
		if len(labels) > 0 {
			meta["labels"] = labels
		}
		owned := false
		for _, ref := range a.GetOwnerReferences() {
			owned = owned || ref.UID == c.uid
		}
		if !owned {
			refs := append(a.GetOwnerReferences(), metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(),
				Kind: "Cluster", Name: cluster.Name, UID: c.uid, BlockOwnerDeletion: ptr.To(true)})
			meta["ownerReferences"] = refs
		}
		if len(meta) > 0 {
			patch["metadata"] = meta
		}
		bootstrap, _, _ := unstructured.NestedBool(a.Object, "spec", "bootstrap")
		wantPhase := addonPending
		if bootstrap && c.initialized || c.available {
			wantPhase = addonDeployed
		}
		if phase != wantPhase && phase != addonDeployed {
			patch["status"] = map[string]any{"phase": wantPhase}
		}
		if wantPhase == addonDeployed && release == ccmReleaseName && c.nodeInitializer == nil {
			nctx, cancel := context.WithCancel(ctx)
			c.nodeInitializer = cancel
			p.wg.Go(func() { p.initializeNodes(nctx, cluster) })
		}
	}
	if len(patch) == 0 {
		return
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		p.tb.Errorf("fakeAddonProvider: %v", err)
		return
	}
	if err := p.kube.Patch(ctx, a, client.RawPatch(types.MergePatchType, raw)); err != nil && ctx.Err() == nil {
		// The next event of the object or its Cluster brings it back here.
		p.tb.Logf("fakeAddonProvider: patch %s %s/%s: %v", a.GetKind(), a.GetNamespace(), a.GetName(), err)
	}
}

// initializeNodes does for a workload cluster what the OpenStack cloud controller manager does for
// each new Node that Cluster API relies on: it sets spec.providerID to the node's server. The
// server is the one CAPO made for the OpenStackMachine of the node's name (servers, and so the
// nodes' host names, are named after their OpenStackMachine), and its provider ID is the one CAPO
// wrote on that OpenStackMachine.
func (p *fakeAddonProvider) initializeNodes(ctx context.Context, cluster types.NamespacedName) {
	workload := p.workloadClient(ctx, cluster)
	if workload == nil {
		return
	}
	pending := map[string]bool{}
	for ctx.Err() == nil {
		w, err := workload.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Deleted || node.Spec.ProviderID != "" || pending[node.Name] {
				continue
			}
			pending[node.Name] = true
			p.wg.Go(func() {
				for ctx.Err() == nil {
					if id := p.serverProviderID(ctx, cluster.Namespace, node.Name); id != "" {
						patch := fmt.Sprintf(`{"spec":{"providerID":%q}}`, id)
						_, err := workload.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
						if err == nil {
							return
						}
						if ctx.Err() == nil {
							p.tb.Logf("fakeAddonProvider: node %s of %s: %v", node.Name, cluster, err)
						}
					}
					sleepCtx(ctx, time.Second)
				}
			})
		}
		w.Stop()
	}
}

// workloadClient reaches the workload cluster's API with the kubeconfig Cluster API writes, as the
// real provider does.
func (p *fakeAddonProvider) workloadClient(ctx context.Context, cluster types.NamespacedName) *kubernetes.Clientset {
	for ctx.Err() == nil {
		var secret corev1.Secret
		key := types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name + "-kubeconfig"}
		if err := p.kube.Get(ctx, key, &secret); err == nil {
			cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
			if err != nil {
				p.tb.Errorf("fakeAddonProvider: kubeconfig of %s: %v", cluster, err)
				return nil
			}
			cfg.Timeout = 30 * time.Second
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				p.tb.Errorf("fakeAddonProvider: %v", err)
				return nil
			}
			return cs
		}
		sleepCtx(ctx, time.Second)
	}
	return nil
}

func (p *fakeAddonProvider) serverProviderID(ctx context.Context, namespace, node string) string {
	osm := &unstructured.Unstructured{}
	osm.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: "OpenStackMachine"})
	if err := p.kube.Get(ctx, types.NamespacedName{Namespace: namespace, Name: node}, osm); err != nil {
		return ""
	}
	id, _, _ := unstructured.NestedString(osm.Object, "spec", "providerID")
	return id
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
