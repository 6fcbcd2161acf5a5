package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// capiSimulation stands in for Cluster API's controllers (topology, machine deployment, machine,
// control plane, ClusterResourceSet) on the harness's own apiserver, so that the bridge's apply,
// watch, decide and database paths run for real without a single machine. For every Cluster the
// bridge makes in its namespaces it writes what CAPI would:
//
//  1. the MachineDeployment of each topology worker class and the Machines of the control plane
//     and of each deployment (labels as CAPI sets them), and the Cluster's status while
//     provisioning (InfrastructureReady, not yet Available);
//  2. after readyAfter: the control-plane endpoint, every Machine Ready with an address, the
//     deployments' replica counts, and the Cluster Available with its control-plane and worker
//     counts;
//
// and for every ClusterResourceSet a ClusterResourceSetBinding with all its resources applied.
// When a Cluster is deleted (nothing holds it: the simulation sets no finalizers), it deletes the
// Cluster's MachineDeployments and Machines, as CAPI and the garbage collector would.
type capiSimulation struct {
	c          client.WithWatch
	prefix     string
	readyAfter time.Duration
	tb         testing.TB

	mu          sync.Mutex
	provisioned map[string]bool // namespace/name of Clusters taken in
	bound       map[string]bool // namespace/name of ClusterResourceSets bound
	work        chan func(context.Context)
}

const simManager = "capi-simulation"

func startCAPISimulation(ctx context.Context, tb testing.TB, c client.WithWatch, prefix string, readyAfter time.Duration, workers int) *capiSimulation {
	s := &capiSimulation{c: c, prefix: prefix, readyAfter: readyAfter, tb: tb,
		provisioned: map[string]bool{}, bound: map[string]bool{}, work: make(chan func(context.Context), 100000)}
	for range workers {
		go func() {
			for {
				select {
				case f := <-s.work:
					f(ctx)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go s.watch(ctx, &clusterv1.ClusterList{}, func(obj any) {
		if cl, ok := obj.(*clusterv1.Cluster); ok && s.take(s.provisioned, cl.Namespace+"/"+cl.Name, cl.Namespace) {
			s.work <- func(ctx context.Context) { s.provision(ctx, cl.Namespace, cl.Name) }
		}
	})
	go s.watchDeleted(ctx, func(cl *clusterv1.Cluster) {
		if !strings.HasPrefix(cl.Namespace, s.prefix) {
			return
		}
		s.work <- func(ctx context.Context) { s.deprovision(ctx, cl.Namespace, cl.Name) }
	})
	go s.watch(ctx, &addonsv1.ClusterResourceSetList{}, func(obj any) {
		if crs, ok := obj.(*addonsv1.ClusterResourceSet); ok && s.take(s.bound, crs.Namespace+"/"+crs.Name, crs.Namespace) {
			s.work <- func(ctx context.Context) { s.bind(ctx, crs) }
		}
	})
	return s
}

// take marks key as handled; false when it already was or the namespace is not the bridge's.
func (s *capiSimulation) take(set map[string]bool, key, namespace string) bool {
	if !strings.HasPrefix(namespace, s.prefix) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if set[key] {
		return false
	}
	set[key] = true
	return true
}

// watch calls added for every object added (also those listed again when the watch restarts).
func (s *capiSimulation) watch(ctx context.Context, list client.ObjectList, added func(any)) {
	for ctx.Err() == nil {
		w, err := s.c.Watch(ctx, list)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				added(ev.Object)
			}
		}
		w.Stop()
	}
}

// watchDeleted calls deleted for every Cluster deleted while the watch runs.
func (s *capiSimulation) watchDeleted(ctx context.Context, deleted func(*clusterv1.Cluster)) {
	for ctx.Err() == nil {
		w, err := s.c.Watch(ctx, &clusterv1.ClusterList{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if cl, ok := ev.Object.(*clusterv1.Cluster); ok && ev.Type == watch.Deleted {
				deleted(cl)
			}
		}
		w.Stop()
	}
}

// deprovision removes what provision made for a deleted Cluster, and forgets it.
func (s *capiSimulation) deprovision(ctx context.Context, ns, name string) {
	sel := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	for _, obj := range []client.Object{&clusterv1.MachineDeployment{}, &clusterv1.Machine{}} {
		if err := s.c.DeleteAllOf(ctx, obj, client.InNamespace(ns), sel); err != nil && !apierrors.IsNotFound(err) {
			s.fail("delete the %T of %s/%s: %v", obj, ns, name, err)
		}
	}
	s.mu.Lock()
	delete(s.provisioned, ns+"/"+name)
	s.mu.Unlock()
}

func (s *capiSimulation) fail(format string, args ...any) {
	s.tb.Errorf("CAPI simulation: "+format, args...)
}

func cond(t string, status metav1.ConditionStatus, reason, message string, gen int64) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
}

func (s *capiSimulation) provision(ctx context.Context, ns, name string) {
	var cl clusterv1.Cluster
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cl); err != nil {
		if ctx.Err() == nil {
			s.fail("get cluster %s/%s: %v", ns, name, err)
		}
		return
	}
	version := cl.Spec.Topology.Version
	base := map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.ClusterTopologyOwnedLabel: ""}
	var machines []*clusterv1.Machine
	var mds []*clusterv1.MachineDeployment
	newMachine := func(mname string, labels map[string]string) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mname, Labels: labels},
			Spec: clusterv1.MachineSpec{ClusterName: name, Version: version,
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: mname}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachine", Name: mname}},
		}
	}
	cp := 1
	if r := cl.Spec.Topology.ControlPlane.Replicas; r != nil {
		cp = int(*r)
	}
	for i := range cp {
		machines = append(machines, newMachine(fmt.Sprintf("%s-cp-%d", name, i),
			templates.MergeLabels(base, map[string]string{clusterv1.MachineControlPlaneLabel: ""})))
	}
	workers := 0
	for _, t := range cl.Spec.Topology.Workers.MachineDeployments {
		mdName := name + "-" + t.Name
		labels := templates.MergeLabels(templates.MergeLabels(base, t.Metadata.Labels), map[string]string{clusterv1.MachineDeploymentNameLabel: mdName,
			clusterv1.ClusterTopologyMachineDeploymentNameLabel: t.Name})
		replicas := ptr.Deref(t.Replicas, 1)
		workers += int(replicas)
		mds = append(mds, &clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mdName, Labels: labels},
			Spec: clusterv1.MachineDeploymentSpec{ClusterName: name, Replicas: ptr.To(replicas),
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: mdName}},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
					Spec: newMachine(mdName, nil).Spec}},
		})
		for i := range int(replicas) {
			machines = append(machines, newMachine(fmt.Sprintf("%s-%d", mdName, i), labels))
		}
	}
	for _, md := range mds {
		if err := s.c.Create(ctx, md, client.FieldOwner(simManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			s.fail("create %s: %v", md.Name, err)
			return
		}
	}
	for _, m := range machines {
		if err := s.c.Create(ctx, m, client.FieldOwner(simManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			s.fail("create %s: %v", m.Name, err)
			return
		}
	}
	s.updateCluster(ctx, ns, name, func(c *clusterv1.Cluster) {
		g := c.Generation
		c.Status.ObservedGeneration = g
		c.Status.Phase = string(clusterv1.ClusterPhaseProvisioning)
		c.Status.Conditions = []metav1.Condition{
			cond(clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionTrue, "Ready", "", g),
			cond(clusterv1.ClusterTopologyReconciledCondition, metav1.ConditionTrue, "ReconcileSucceeded", "", g),
			cond(clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionFalse, "NotAvailable", "simulated: control plane machines starting", g),
			cond(clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionFalse, "NotAvailable", "simulated: workers starting", g),
			cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "NotAvailable", "simulated: provisioning", g),
		}
		c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To(int32(cp)), Replicas: ptr.To(int32(cp)),
			UpToDateReplicas: ptr.To(int32(cp)), ReadyReplicas: ptr.To(int32(0)), AvailableReplicas: ptr.To(int32(0))}
		c.Status.Workers = &clusterv1.WorkersStatus{DesiredReplicas: ptr.To(int32(workers)), Replicas: ptr.To(int32(workers)),
			UpToDateReplicas: ptr.To(int32(workers)), ReadyReplicas: ptr.To(int32(0)), AvailableReplicas: ptr.To(int32(0))}
	})
	ready := func(ctx context.Context) { s.ready(ctx, ns, name, machines, mds, cp, workers) }
	if s.readyAfter <= 0 {
		ready(ctx)
		return
	}
	time.AfterFunc(s.readyAfter, func() { s.work <- ready })
}

// ready turns the machines, deployments and the Cluster ready, as CAPI does once nodes joined.
func (s *capiSimulation) ready(ctx context.Context, ns, name string, machines []*clusterv1.Machine, mds []*clusterv1.MachineDeployment, cp, workers int) {
	var cl clusterv1.Cluster
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cl); err != nil {
		s.fail("get cluster %s/%s: %v", ns, name, err)
		return
	}
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}
	if err := s.c.Patch(ctx, &cl, patch, client.FieldOwner(simManager)); err != nil {
		s.fail("control plane endpoint of %s: %v", name, err)
		return
	}
	for i, m := range machines {
		m.Status.Phase = string(clusterv1.MachinePhaseRunning)
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: m.Name}
		m.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}}
		m.Status.ObservedGeneration = m.Generation
		m.Status.Conditions = []metav1.Condition{
			cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionTrue, "Ready", "", m.Generation),
			cond(clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionTrue, "Ready", "", m.Generation),
			cond(clusterv1.MachineNodeReadyCondition, metav1.ConditionTrue, "NodeReady", "", m.Generation),
			cond(clusterv1.MachineReadyCondition, metav1.ConditionTrue, "Ready", "", m.Generation),
			cond(clusterv1.MachineAvailableCondition, metav1.ConditionTrue, "Available", "", m.Generation),
		}
		if err := s.c.Status().Update(ctx, m, client.FieldOwner(simManager)); err != nil {
			s.fail("machine %s status: %v", m.Name, err)
			return
		}
	}
	for _, md := range mds {
		r := ptr.Deref(md.Spec.Replicas, 0)
		md.Status.ObservedGeneration = md.Generation
		md.Status.Replicas, md.Status.ReadyReplicas, md.Status.AvailableReplicas, md.Status.UpToDateReplicas = ptr.To(r), ptr.To(r), ptr.To(r), ptr.To(r)
		md.Status.Phase = string(clusterv1.MachineDeploymentPhaseRunning)
		if err := s.c.Status().Update(ctx, md, client.FieldOwner(simManager)); err != nil {
			s.fail("machine deployment %s status: %v", md.Name, err)
			return
		}
	}
	s.updateCluster(ctx, ns, name, func(c *clusterv1.Cluster) {
		g := c.Generation
		c.Status.ObservedGeneration = g
		c.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
		c.Status.Initialization = clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: ptr.To(true), ControlPlaneInitialized: ptr.To(true)}
		c.Status.Conditions = availableConditions(g, true, "")
		n32, w32 := ptr.To(int32(cp)), ptr.To(int32(workers))
		c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: n32, Replicas: n32, UpToDateReplicas: n32, ReadyReplicas: n32, AvailableReplicas: n32}
		c.Status.Workers = &clusterv1.WorkersStatus{DesiredReplicas: w32, Replicas: w32, UpToDateReplicas: w32, ReadyReplicas: w32, AvailableReplicas: w32}
	})
}

// availableConditions are a provisioned Cluster's conditions; available false carries message as
// the reason CAPI would give.
func availableConditions(g int64, available bool, message string) []metav1.Condition {
	st, reason := metav1.ConditionTrue, "Available"
	if !available {
		st, reason = metav1.ConditionFalse, "NotAvailable"
	}
	return []metav1.Condition{
		cond(clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionTrue, "Ready", "", g),
		cond(clusterv1.ClusterTopologyReconciledCondition, metav1.ConditionTrue, "ReconcileSucceeded", "", g),
		cond(clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionTrue, "Available", "", g),
		cond(clusterv1.ClusterWorkersAvailableCondition, st, reason, message, g),
		cond(clusterv1.ClusterRemoteConnectionProbeCondition, metav1.ConditionTrue, "ProbeSucceeded", "", g),
		cond(clusterv1.AvailableCondition, st, reason, message, g),
	}
}

// setAvailable flips a provisioned Cluster's Available condition (the workers' summary with it), as
// CAPI does when nodes go away and come back.
func (s *capiSimulation) setAvailable(ctx context.Context, ns, name string, available bool, message string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var c clusterv1.Cluster
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
			return err
		}
		c.Status.Conditions = availableConditions(c.Generation, available, message)
		return s.c.Status().Update(ctx, &c, client.FieldOwner(simManager))
	})
}

func (s *capiSimulation) updateCluster(ctx context.Context, ns, name string, mutate func(*clusterv1.Cluster)) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var c clusterv1.Cluster
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
			return err
		}
		mutate(&c)
		return s.c.Status().Update(ctx, &c, client.FieldOwner(simManager))
	})
	if err != nil && ctx.Err() == nil {
		s.fail("cluster %s/%s status: %v", ns, name, err)
	}
}

// bind records every resource of the set as applied to its cluster (named after the set, less
// "-addons", as the bridge names them).
func (s *capiSimulation) bind(ctx context.Context, crs *addonsv1.ClusterResourceSet) {
	clusterName, ok := strings.CutSuffix(crs.Name, "-addons")
	if !ok {
		return
	}
	var res []addonsv1.ResourceBinding
	for _, r := range crs.Spec.Resources {
		res = append(res, addonsv1.ResourceBinding{ResourceRef: r, Applied: ptr.To(true), Hash: "sha256:simulated", LastAppliedTime: metav1.Now()})
	}
	b := &addonsv1.ClusterResourceSetBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: crs.Namespace, Name: clusterName, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
		Spec: addonsv1.ClusterResourceSetBindingSpec{ClusterName: clusterName,
			Bindings: []addonsv1.ResourceSetBinding{{ClusterResourceSetName: crs.Name, Resources: res}}},
	}
	if err := s.c.Create(ctx, b, client.FieldOwner(simManager)); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
		s.fail("binding of %s: %v", crs.Name, err)
	}
}
