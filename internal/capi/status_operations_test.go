package capi

import (
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

func machine(name string, controlPlane, ready bool) clusterv1.Machine {
	m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	m.Spec.Version = "v1.36.3"
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	} else {
		m.Labels[templates.LabelNodeGroupUUID] = ngWorker
	}
	st := metav1.ConditionFalse
	if ready {
		st = metav1.ConditionTrue
	}
	m.Status.Conditions = []metav1.Condition{cond(clusterv1.MachineReadyCondition, st, "")}
	return m
}

// settledUpdate is a cluster whose control plane is being resized from 1 to 3 (Magnum 23's
// `coe cluster resize C 3 --nodegroup default-master`): the topology already says 3 and the
// Cluster's copied control-plane status still says 1 of 1, as seen live 7 s after the apply.
func controlPlaneResize(machines ...clusterv1.Machine) (Current, Observation) {
	cur := current(magnum.StatusUpdateInProgress)
	cur.NodeGroups[0].NodeCount, cur.NodeGroups[0].Status = 3, magnum.StatusUpdateInProgress
	cur.NodeGroups[1].Status = magnum.StatusUpdateComplete
	c := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
	c.Spec.Topology.ControlPlane.Replicas = ptr.To[int32](3)
	c.Status.Workers.ReadyReplicas, c.Status.Workers.AvailableReplicas = ptr.To[int32](2), ptr.To[int32](2)
	return cur, Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}, Machines: machines}
}

func TestControlPlaneResizeIsNotCompleteWhileMachinesAreMissing(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	workers := []clusterv1.Machine{machine("w-1", false, true), machine("w-2", false, true)}

	// The stale status of the issue: one ready control-plane machine, a second one provisioning.
	cur, obs := controlPlaneResize(append(workers, machine("cp-1", true, true), machine("cp-2", true, false))...)
	d := Decide(cur, obs, now)
	require.Equal(t, magnum.StatusUpdateInProgress, d.Status, "1 of 3 control-plane machines ready is not converged")

	// Three machines, all ready, but KCP's status (copied to the Cluster) still lags.
	cur, obs = controlPlaneResize(append(workers, machine("cp-1", true, true), machine("cp-2", true, true), machine("cp-3", true, true))...)
	require.Equal(t, magnum.StatusUpdateInProgress, Decide(cur, obs, now).Status, "the control plane's own status must agree")

	// Everything agrees: complete.
	obs.Cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](3), Replicas: ptr.To[int32](3),
		ReadyReplicas: ptr.To[int32](3), AvailableReplicas: ptr.To[int32](3), UpToDateReplicas: ptr.To[int32](3)}
	d = Decide(cur, obs, now)
	require.Equal(t, magnum.StatusUpdateComplete, d.Status)
	require.Equal(t, magnum.StatusUpdateComplete, d.NodeGroups[0].Status)

	// One of them not ready: not complete.
	obs.Machines[len(obs.Machines)-1] = machine("cp-3", true, false)
	require.Equal(t, magnum.StatusUpdateInProgress, Decide(cur, obs, now).Status)
}

func TestFailedReasonStaysAcrossLaterEvents(t *testing.T) {
	for _, status := range []magnum.ClusterStatus{magnum.StatusCreateFailed, magnum.StatusUpdateFailed, magnum.StatusDeleteFailed} {
		cur := current(status)
		cur.StatusReason = "The update did not finish: machine m-1 failed"
		obs := Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))}
		d := Decide(cur, obs, time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC))
		require.Equal(t, status, d.Status)
		require.Equal(t, cur.StatusReason, d.StatusReason, "a %s reason is kept until the next operation", status)
	}
}

func TestUpdateThatNeverConvergesFailsAtItsDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cur := current(magnum.StatusUpdateInProgress)
	cur.NodeGroups[1].Status, cur.NodeGroups[1].NodeCount = magnum.StatusUpdateInProgress, 3
	cur.Deadline, cur.DeadlineName = start.Add(time.Hour), "update_timeout of 1h0m0s"
	obs := Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""),
		cond(clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionFalse, "MachineDeployment default-worker: 2 of 3 available")),
		MachineDeployments: []clusterv1.MachineDeployment{md(3, 2)}}

	d := Decide(cur, obs, start.Add(59*time.Minute))
	require.Equal(t, magnum.StatusUpdateInProgress, d.Status)
	require.False(t, d.Terminal)

	d = Decide(cur, obs, start.Add(61*time.Minute))
	require.Equal(t, magnum.StatusUpdateFailed, d.Status)
	require.True(t, d.Terminal)
	require.Contains(t, d.StatusReason, "update_timeout of 1h0m0s")
	require.Contains(t, d.StatusReason, "WorkersAvailable: MachineDeployment default-worker: 2 of 3 available")
	require.Equal(t, magnum.StatusUpdateFailed, d.NodeGroups[1].Status, "the group being resized fails with the cluster")
	require.Equal(t, d.StatusReason, d.NodeGroups[1].StatusReason)
}

func TestDeleteThatNeverFinishesFailsAtItsDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cur := current(magnum.StatusDeleteInProgress)
	for i := range cur.NodeGroups {
		cur.NodeGroups[i].Status = magnum.StatusDeleteInProgress
	}
	cur.Deadline, cur.DeadlineName = start.Add(30*time.Minute), "delete_timeout of 30m0s"
	c := cluster(cond(clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionFalse, "load balancer still being deleted"))
	obs := Observation{Cluster: c}
	require.Equal(t, magnum.StatusDeleteInProgress, Decide(cur, obs, start.Add(29*time.Minute)).Status)
	d := Decide(cur, obs, start.Add(31*time.Minute))
	require.Equal(t, magnum.StatusDeleteFailed, d.Status)
	require.Contains(t, d.StatusReason, "delete_timeout of 30m0s")
	require.Contains(t, d.StatusReason, "load balancer still being deleted")
}

func TestRootCauseNamesAPausedCluster(t *testing.T) {
	c := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
	c.Spec.Paused = ptr.To(true)
	require.Contains(t, RootCause(Observation{Cluster: c}), "Paused")
}

// Servers that exist but never register a node (an image that does not boot): the create fails at
// its create_timeout naming every such machine and the first one's condition.
func TestCreateTimeoutNamesTheMachinesWithoutANode(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cur := current(magnum.StatusCreateInProgress)
	cur.CreatedAt, cur.CreateTimeout = start, 4*time.Minute
	provisioned := func(name string, controlPlane bool) clusterv1.Machine {
		m := machine(name, controlPlane, false)
		m.Status.Conditions = append(m.Status.Conditions,
			cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionTrue, ""),
			cond(clusterv1.MachineNodeReadyCondition, metav1.ConditionUnknown, "Waiting for a Node with spec.providerID openstack:///0b3c to exist"))
		return m
	}
	joined := provisioned("c-md-joined", false)
	joined.Status.NodeRef.Name = "c-md-joined"
	pending := machine("a-md-pending", false, false) // no server yet: not "without a node"
	pending.Status.Conditions = append(pending.Status.Conditions,
		cond(clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionFalse, "Waiting for Cluster control plane to be initialized"))
	obs := Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "")),
		Machines: []clusterv1.Machine{pending, provisioned("c-md-b", false), joined, provisioned("c-cp-a", true)}}
	require.Equal(t, magnum.StatusCreateInProgress, Decide(cur, obs, start.Add(3*time.Minute)).Status)
	d := Decide(cur, obs, start.Add(5*time.Minute))
	require.Equal(t, magnum.StatusCreateFailed, d.Status)
	require.Equal(t, "Cluster did not become available within its create_timeout of 4m0s: machines provisioned without a node: c-cp-a, c-md-b; "+
		"machine c-cp-a: NodeReady: Waiting for a Node with spec.providerID openstack:///0b3c to exist", d.StatusReason)
}

// What the cloud refused (on CAPO's own objects) explains a create better than the Machines, which
// only wait.
func TestCreateTimeoutNamesTheCloudsRefusal(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cur := current(magnum.StatusCreateInProgress)
	cur.CreatedAt, cur.CreateTimeout = start, 2*time.Minute
	waiting := machine("c-cp-a", true, false)
	waiting.Status.Conditions = append(waiting.Status.Conditions, cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, "WaitingForBootstrapData"))
	quota := "OpenStackServer c-cp-a: error creating Openstack instance: Quota exceeded for instances: Requested 1, but already used 0 of 0 instances"
	obs := Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "")),
		Machines: []clusterv1.Machine{waiting}, CloudFailures: []string{quota, "OpenStackServer c-cp-b: other"}}
	d := Decide(cur, obs, start.Add(3*time.Minute))
	require.Equal(t, magnum.StatusCreateFailed, d.Status)
	require.Equal(t, "Cluster did not become available within its create_timeout of 2m0s: the cloud refused: "+quota+" (and 1 more)", d.StatusReason)
	require.Contains(t, Decide(cur, obs, start.Add(time.Minute)).StatusReason, "Quota exceeded", "the progress reason shows it before the deadline")
}

func TestCloudFailuresAreCAPOsErrorConditions(t *testing.T) {
	o := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "severity": "Error", "message": "error creating Openstack instance: Quota exceeded"},
		map[string]any{"type": "InstanceReady", "status": "False", "severity": "Error", "message": "error creating Openstack instance: Quota exceeded"},
		map[string]any{"type": "FloatingAddressFromPoolReady", "status": "False", "severity": "Warning", "message": "retrying"},
		map[string]any{"type": "Other", "status": "True", "severity": "Error", "message": "fine"},
	}}}}
	o.SetKind("OpenStackServer")
	o.SetName("c-cp-a")
	require.Equal(t, []string{"OpenStackServer c-cp-a: error creating Openstack instance: Quota exceeded"}, cloudFailuresOf(o))
}

// A move to the running bridge's rendering: its reason names the class; the old class settled (the
// move not yet applied, or a watch cache behind the apply) does not end it, nor does a
// MachineDeployment that has not taken in its new template; the new class settled does.
func TestMoveEndsOnceTheClusterHasRolledToItsClass(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	settled := func() (Current, Observation) {
		cur, obs := controlPlaneResize(machine("w-1", false, true), machine("w-2", false, true), machine("cp-1", true, true))
		cur.NodeGroups[0].NodeCount = 1
		obs.Cluster.Spec.Topology.ControlPlane.Replicas = ptr.To[int32](1)
		obs.Cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](1), Replicas: ptr.To[int32](1),
			ReadyReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1), UpToDateReplicas: ptr.To[int32](1)}
		obs.Cluster.Spec.Topology.ClassRef.Name = "magnum-old"
		cur.StatusReason = MoveReason("magnum-new")
		return cur, obs
	}
	cur, obs := settled()
	require.Equal(t, magnum.StatusUpdateComplete, Decide(current(magnum.StatusUpdateInProgress), obs, now).Status,
		"the fixture is settled for an update that is not a move")
	d := Decide(cur, obs, now)
	require.Equal(t, magnum.StatusUpdateInProgress, d.Status, "still on the old class")
	class, ok := MovingTo(d.StatusReason)
	require.True(t, ok, d.StatusReason)
	require.Equal(t, "magnum-new", class, "the reason keeps the class with the progress: %s", d.StatusReason)

	obs.Cluster.Spec.Topology.ClassRef.Name = "magnum-new"
	obs.MachineDeployments[0].Generation, obs.MachineDeployments[0].Status.ObservedGeneration = 3, 2
	require.Equal(t, magnum.StatusUpdateInProgress, Decide(cur, obs, now).Status, "a MachineDeployment behind its new template")

	obs.MachineDeployments[0].Status.ObservedGeneration = 3
	d = Decide(cur, obs, now)
	require.Equal(t, magnum.StatusUpdateComplete, d.Status, "no MachineSets observed (the watch's view): the counts decide")
	require.Empty(t, d.StatusReason)

	// Read from the apiserver: the MachineDeployment has taken in its new template and still counts
	// its old machines up to date; the old template's MachineSet holding them says otherwise.
	md := &obs.MachineDeployments[0]
	md.Name = "c-default-worker"
	md.Spec.Template.Spec.Bootstrap.ConfigRef.Name = "c-default-worker-new"
	md.Spec.Template.Spec.InfrastructureRef.Name = "c-default-worker-infra"
	set := func(name, bootstrap string, replicas int32) clusterv1.MachineSet {
		ms := clusterv1.MachineSet{}
		ms.Name = name
		ms.Labels = map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name}
		ms.Spec.Replicas, ms.Status.Replicas = ptr.To(replicas), ptr.To(replicas)
		ms.Spec.Template.Spec.Bootstrap.ConfigRef.Name = bootstrap
		ms.Spec.Template.Spec.InfrastructureRef.Name = "c-default-worker-infra"
		return ms
	}
	obs.MachineSets = []clusterv1.MachineSet{set("old", "c-default-worker-old", 2)}
	require.Equal(t, magnum.StatusUpdateInProgress, Decide(cur, obs, now).Status, "no MachineSet of the new template yet")
	obs.MachineSets = append(obs.MachineSets, set("new", "c-default-worker-new", 0))
	require.Equal(t, magnum.StatusUpdateInProgress, Decide(cur, obs, now).Status, "the old template's set still holds machines")
	obs.MachineSets = []clusterv1.MachineSet{set("old", "c-default-worker-old", 0), set("new", "c-default-worker-new", 2),
		set("other-group", "c-other-old", 1)}
	obs.MachineSets[2].Labels[clusterv1.MachineDeploymentNameLabel] = "c-other"
	require.Equal(t, magnum.StatusUpdateComplete, Decide(cur, obs, now).Status, "the old set is empty; another group's sets are not this one's")
}

func TestMovingTo(t *testing.T) {
	for reason, want := range map[string]string{
		MoveReason("magnum-abc"):                         "magnum-abc",
		MoveReason("magnum-abc") + ": workers 1/2 ready": "magnum-abc",
		"control plane 1/1 ready":                        "",
		"":                                               "",
		"moving to this bridge's rendering, class ": "",
	} {
		got, ok := MovingTo(reason)
		require.Equal(t, want, got, reason)
		require.Equal(t, want != "", ok, reason)
	}
}
