package capi

import (
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

const ngWorker = "22222222-2222-2222-2222-222222222222"

func cond(t string, s metav1.ConditionStatus, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Message: msg}
}

func cluster(conds ...metav1.Condition) *clusterv1.Cluster {
	c := &clusterv1.Cluster{}
	c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 20001}
	c.Spec.Topology.Version = "v1.36.3"
	c.Spec.Topology.ControlPlane.Replicas = ptr.To[int32](1)
	c.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Name: "default-worker", Replicas: ptr.To[int32](2)}}
	c.Status.Conditions = append([]metav1.Condition{cond(clusterv1.ClusterTopologyReconciledCondition, metav1.ConditionTrue, "")}, conds...)
	c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](1), Replicas: ptr.To[int32](1), ReadyReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1)}
	c.Status.Workers = &clusterv1.WorkersStatus{DesiredReplicas: ptr.To[int32](2), ReadyReplicas: ptr.To[int32](1), AvailableReplicas: ptr.To[int32](1)}
	return c
}

func md(replicas, ready int32) clusterv1.MachineDeployment {
	m := clusterv1.MachineDeployment{}
	m.Labels = map[string]string{templates.LabelNodeGroupUUID: ngWorker}
	m.Spec.Replicas = ptr.To(replicas)
	m.Status.Replicas, m.Status.AvailableReplicas, m.Status.UpToDateReplicas = ptr.To(ready), ptr.To(ready), ptr.To(ready)
	return m
}

func current(status magnum.ClusterStatus) Current {
	return Current{Status: status, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), CreateTimeout: time.Hour,
		NodeGroups: []NodeGroupState{
			{UUID: "11111111-1111-1111-1111-111111111111", Name: "default-master", Role: "master", Status: magnum.StatusCreateInProgress, NodeCount: 1},
			{UUID: ngWorker, Name: "default-worker", Role: "worker", Status: magnum.StatusCreateInProgress, NodeCount: 2},
		}}
}

func TestDecide(t *testing.T) {
	early := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	late := time.Date(2026, 1, 1, 1, 0, 1, 0, time.UTC)
	availableAll := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
	availableAll.Status.Workers.ReadyReplicas, availableAll.Status.Workers.AvailableReplicas = ptr.To[int32](2), ptr.To[int32](2)

	cases := []struct {
		name       string
		cur        Current
		obs        Observation
		now        time.Time
		wantStatus magnum.ClusterStatus
		wantReason string
		wantNG     magnum.ClusterStatus
		terminal   bool
	}{
		{"create in progress shows progress", current(magnum.StatusCreateInProgress),
			Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "x"),
				cond(clusterv1.ClusterWorkersAvailableCondition, metav1.ConditionFalse, "1 of 2 available")), MachineDeployments: []clusterv1.MachineDeployment{md(2, 1)}},
			early, magnum.StatusCreateInProgress, "control plane 1/1 ready, workers 1/2 ready; WorkersAvailable: 1 of 2 available", magnum.StatusCreateInProgress, false},
		{"create completes when available and settled", current(magnum.StatusCreateInProgress),
			Observation{Cluster: availableAll, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}},
			early, magnum.StatusCreateComplete, "", magnum.StatusCreateComplete, true},
		{"available but still scaling is not complete", current(magnum.StatusCreateInProgress),
			Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, "")), MachineDeployments: []clusterv1.MachineDeployment{md(2, 1)}},
			early, magnum.StatusCreateInProgress, "control plane 1/1 ready, workers 1/2 ready", magnum.StatusCreateInProgress, false},
		{"create times out with the root cause", current(magnum.StatusCreateInProgress),
			Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "")),
				Machines: []clusterv1.Machine{{ObjectMeta: metav1.ObjectMeta{Name: "m-1"}, Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{
					cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, "VM is still provisioning")}}}}},
			late, magnum.StatusCreateFailed, "Cluster did not become available within its create_timeout of 1h0m0s: machine m-1: InfrastructureReady: VM is still provisioning", magnum.StatusCreateFailed, true},
		{"update completes", current(magnum.StatusUpdateInProgress),
			Observation{Cluster: availableAll, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}},
			late, magnum.StatusUpdateComplete, "", magnum.StatusCreateComplete, true}, // a group added by nodegroup_create completes too
		{"complete cluster stays complete", current(magnum.StatusCreateComplete),
			Observation{Cluster: availableAll, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}},
			late, magnum.StatusCreateComplete, "", magnum.StatusCreateComplete, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.cur, tc.obs, tc.now)
			require.Equal(t, tc.wantStatus, d.Status)
			require.Equal(t, tc.wantReason, d.StatusReason)
			require.Equal(t, tc.terminal, d.Terminal)
			require.Equal(t, tc.wantNG, d.NodeGroups[1].Status)
			require.Equal(t, "https://127.0.0.1:20001", d.APIAddress)
			require.Equal(t, "v1.36.3", d.COEVersion)
		})
	}
}

func TestResizedNodeGroupCompletesAndCountsFollowCAPI(t *testing.T) {
	cur := current(magnum.StatusUpdateInProgress)
	cur.NodeGroups[1].Status = magnum.StatusUpdateInProgress
	cur.NodeGroups[1].NodeCount = 3
	c := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
	c.Status.Workers.ReadyReplicas, c.Status.Workers.AvailableReplicas, c.Status.Workers.DesiredReplicas = ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](3)

	// Just applied: CAPI still shows the old size everywhere, which must not read as done.
	d := Decide(cur, Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}}, time.Now())
	require.Equal(t, magnum.StatusUpdateInProgress, d.Status)
	require.Equal(t, magnum.StatusUpdateInProgress, d.NodeGroups[1].Status)
	require.Equal(t, 3, d.NodeGroups[1].NodeCount, "the stored goal is kept while CAPI catches up")
	// The topology controller has not observed the new spec yet.
	c.Generation = 2
	d = Decide(cur, Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(3, 3)}}, time.Now())
	require.Equal(t, magnum.StatusUpdateInProgress, d.Status)
	c.Status.ObservedGeneration = 2

	d = Decide(cur, Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(3, 3)}}, time.Now())
	require.Equal(t, magnum.StatusUpdateComplete, d.Status)
	require.Equal(t, magnum.StatusUpdateComplete, d.NodeGroups[1].Status)

	// An autoscaler changed the replicas of a complete cluster: node_count follows.
	cur = current(magnum.StatusCreateComplete)
	cur.NodeGroups[1].Status = magnum.StatusCreateComplete
	cur.NodeGroups[1].Autoscaled = true
	d = Decide(cur, Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(5, 3)}}, time.Now())
	require.Equal(t, 5, d.NodeGroups[1].NodeCount)
}

func TestHealth(t *testing.T) {
	d := Decide(current(magnum.StatusCreateComplete), Observation{Cluster: cluster(
		cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "control plane down"),
		cond(clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionTrue, ""))}, time.Now())
	require.Equal(t, magnum.HealthUnhealthy, d.Health)
	require.Equal(t, "Ready", d.HealthReason["infrastructure"])
	require.Equal(t, "False: control plane down", d.HealthReason["cluster"])
	require.Equal(t, "Unknown", d.HealthReason["controlplane"])
	d = Decide(current(magnum.StatusCreateComplete), Observation{Cluster: cluster()}, time.Now())
	require.Equal(t, magnum.HealthUnknown, d.Health)
	d = Decide(current(magnum.StatusCreateComplete), Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))}, time.Now())
	require.Equal(t, magnum.HealthHealthy, d.Health)
}

func TestHealthIsUnknownWhileCreating(t *testing.T) {
	d := Decide(current(magnum.StatusCreateInProgress), Observation{Cluster: cluster(cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "not yet"))}, time.Now())
	require.Equal(t, magnum.HealthUnknown, d.Health)
}

func TestAddresses(t *testing.T) {
	cp := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}}}
	cp.Status.Addresses = clusterv1.MachineAddresses{{Type: "InternalIP", Address: "10.0.0.5"}, {Type: "Hostname", Address: "cp-host"}}
	w1 := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{templates.LabelNodeGroupUUID: ngWorker}}}
	w1.Status.Addresses = clusterv1.MachineAddresses{{Type: "Hostname", Address: "w1-host"}}
	w2 := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w2", Labels: map[string]string{templates.LabelNodeGroupUUID: ngWorker}}}
	w2.Status.NodeRef.Name = "w2-node"
	d := Decide(current(magnum.StatusCreateComplete), Observation{Cluster: cluster(), Machines: []clusterv1.Machine{cp, w1, w2}}, time.Now())
	require.Equal(t, []string{"10.0.0.5"}, d.NodeGroups[0].NodeAddresses)
	require.Equal(t, []string{"w1-host", "w2-node"}, d.NodeGroups[1].NodeAddresses)
}

func TestDeletedNodeGroupIsGoneWhenItsMachinesAre(t *testing.T) {
	cur := current(magnum.StatusUpdateInProgress)
	cur.NodeGroups[0].Status, cur.NodeGroups[1].Status = magnum.StatusCreateComplete, magnum.StatusCreateComplete
	cur.NodeGroups = append(cur.NodeGroups, NodeGroupState{UUID: "33333333-3333-3333-3333-333333333333", Name: "extra", Role: "worker", Status: "DELETE_IN_PROGRESS", NodeCount: 1})
	c := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
	c.Status.Workers.ReadyReplicas, c.Status.Workers.AvailableReplicas = ptr.To[int32](2), ptr.To[int32](2)
	extraMD := md(1, 1)
	extraMD.Labels = map[string]string{templates.LabelNodeGroupUUID: "33333333-3333-3333-3333-333333333333"}

	d := Decide(cur, Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2), extraMD}}, time.Now())
	require.False(t, d.NodeGroups[2].Gone)
	require.Equal(t, magnum.StatusUpdateInProgress, d.Status)

	d = Decide(cur, Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}}, time.Now())
	require.True(t, d.NodeGroups[2].Gone)
	require.Equal(t, magnum.StatusUpdateComplete, d.Status)
}

func TestUpgradeIsDoneOnlyWhenEveryMachineRunsTheNewVersion(t *testing.T) {
	cur := current(magnum.StatusUpdateInProgress)
	cur.NodeGroups[0].Status, cur.NodeGroups[1].Status = magnum.StatusUpdateInProgress, magnum.StatusUpdateInProgress
	c := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
	c.Status.Workers.ReadyReplicas, c.Status.Workers.AvailableReplicas = ptr.To[int32](2), ptr.To[int32](2)
	machine := func(name, version string, labels map[string]string) clusterv1.Machine {
		m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		m.Spec.Version = version
		m.Status.Conditions = []metav1.Condition{cond(clusterv1.MachineReadyCondition, metav1.ConditionTrue, "")}
		return m
	}
	cp := map[string]string{clusterv1.MachineControlPlaneLabel: ""}
	w := map[string]string{templates.LabelNodeGroupUUID: ngWorker}
	// The topology says v1.36.3, but a surge machine runs next to machines still on v1.35.4.
	obs := Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}, Machines: []clusterv1.Machine{
		machine("cp-old", "v1.35.4", cp), machine("cp-new", "v1.36.3", cp), machine("w1", "v1.35.4", w), machine("w2", "v1.35.4", w)}}
	require.Equal(t, magnum.StatusUpdateInProgress, Decide(cur, obs, time.Now()).Status)

	obs.Machines = []clusterv1.Machine{machine("cp-new", "v1.36.3", cp), machine("w3", "v1.36.3", w), machine("w4", "v1.36.3", w)}
	d := Decide(cur, obs, time.Now())
	require.Equal(t, magnum.StatusUpdateComplete, d.Status)
	require.Equal(t, magnum.StatusUpdateComplete, d.NodeGroups[0].Status)
	require.Equal(t, magnum.StatusUpdateComplete, d.NodeGroups[1].Status)
}

func TestStaleCacheDoesNotCompleteAnUpgrade(t *testing.T) {
	cur := current(magnum.StatusUpdateInProgress)
	cur.Version = "v1.37.0" // Magnum asked for it; the watched Cluster still says v1.36.3
	c := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
	c.Status.Workers.ReadyReplicas, c.Status.Workers.AvailableReplicas = ptr.To[int32](2), ptr.To[int32](2)
	obs := Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}}
	require.Equal(t, magnum.StatusUpdateInProgress, Decide(cur, obs, time.Now()).Status)
	c.Spec.Topology.Version = "v1.37.0"
	require.Equal(t, magnum.StatusUpdateComplete, Decide(cur, obs, time.Now()).Status)
}
