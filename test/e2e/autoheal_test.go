package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// autoHealTimeout is how long a worker's node may stay not Ready before its MachineHealthCheck has it
// replaced. The bridge's default is the anchors' 5 minutes (docs/labels.md, auto_healing_enabled);
// these tests set the bridge's auto_healing_node_timeout label to a minute so CI does not wait out
// the default. TestAutoHealingReplacesUnhealthyWorker checks the MachineHealthCheck carries this
// value, so the disabled variant's wait stays tied to it.
const autoHealTimeout = time.Minute

var autoHealLabel = fmt.Sprintf("auto_healing_node_timeout=%d", int(autoHealTimeout.Seconds()))

// TestAutoHealingReplacesUnhealthyWorker: a worker whose node reports Ready=Unknown (what a node whose
// kubelet stopped posting status looks like) is replaced by CAPI's MachineHealthCheck once the timeout
// has passed; Magnum keeps the cluster CREATE_COMPLETE with one worker, reports the cluster UNHEALTHY
// while the node is down and HEALTHY again once the replacement runs.
func TestAutoHealingReplacesUnhealthyWorker(t *testing.T) {
	requireStack(t)
	t.Parallel()
	id, c := createOneWorkerCluster(t, "heal-", "--labels", autoHealLabel)

	// auto_healing_enabled defaults to true: the topology holds the worker group's health check. The
	// in-memory class has none for the control plane (KCP cannot remediate its only machine anyway).
	mhcs := machineHealthChecks(t, c.StackID)
	require.Len(t, mhcs, 1, "one MachineHealthCheck, the default-worker group's")
	conds := mhcs[0].Spec.Checks.UnhealthyNodeConditions
	require.Len(t, conds, 2)
	for _, u := range conds {
		require.Equal(t, corev1.NodeReady, u.Type)
		require.NotNil(t, u.TimeoutSeconds)
		require.Equal(t, autoHealTimeout, time.Duration(*u.TimeoutSeconds)*time.Second, "Ready=%s", u.Status)
	}

	kc := workloadKubeconfig(t, id)
	old := onlyWorker(t, c.StackID)
	node := old.Status.NodeRef.Name
	events := watchWorkerMachines(t, c.StackID)
	start := time.Now()
	setNodeReady(t, kc, node, corev1.ConditionUnknown)
	timed(t, "worker node marked Ready=Unknown", start)

	magnum := newMagnumWatch(t, id, start)
	var marked, deleting, oldGone, newRunning time.Duration
	var replacement string
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	timeout := time.After(autoHealTimeout + 4*time.Minute)
	for newRunning == 0 || oldGone == 0 {
		select {
		case ev := <-events:
			m, at := ev.Machine, ev.At.Sub(start)
			switch {
			case ev.Type == "ERROR":
				t.Logf("machine watch: %s (opened again)", ev.Err)
			case m.Name == old.Name && ev.Type == "DELETED":
				oldGone = at
				t.Logf("TIMING %-40s %6.1fs", "unhealthy mark → old Machine gone", at.Seconds())
			case m.Name == old.Name:
				if marked == 0 && conditionIs(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition, metav1.ConditionFalse) {
					marked = at
					t.Logf("TIMING %-40s %6.1fs", "unhealthy mark → MHC marks the Machine", at.Seconds())
				}
				if deleting == 0 && m.DeletionTimestamp != nil {
					deleting = at
					t.Logf("TIMING %-40s %6.1fs", "unhealthy mark → old Machine deleting", at.Seconds())
				}
			case newRunning == 0 && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.Name != "":
				newRunning, replacement = at, m.Name
				t.Logf("TIMING %-40s %6.1fs", "unhealthy mark → new Machine Running", at.Seconds())
			}
		case <-tick.C:
			magnum.poll()
			// A list backs the watch up: what it shows now is true even if an event never arrived.
			now := time.Since(start)
			workers := workerMachines(t, c.StackID)
			if oldGone == 0 && !slices.ContainsFunc(workers, func(m clusterv1.Machine) bool { return m.Name == old.Name }) {
				oldGone = now
				t.Logf("old Machine gone by %s (seen by a list, not the watch)", now.Round(time.Second))
			}
			for _, m := range workers {
				if newRunning == 0 && m.Name != old.Name && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.Name != "" {
					newRunning, replacement = now, m.Name
					t.Logf("new Machine %s Running by %s (seen by a list, not the watch)", m.Name, now.Round(time.Second))
				}
			}
		case <-timeout:
			magnum.report()
			t.Fatalf("worker not replaced %s after its node went unhealthy (marked unhealthy after %s, deleting after %s, gone after %s)",
				time.Since(start).Round(time.Second), marked, deleting, oldGone)
		}
	}
	// The MachineHealthCheck acted, and only after its timeout. Its MachineMarkedUnhealthy event is
	// the proof; its timestamp is the moment of the mark when the watch did not show the condition (a
	// Machine remediated between two lists of a lagging watch is never seen marked): a second of
	// slack for the event's rounding to seconds.
	markEvents := markedUnhealthyEvents(t, old)
	require.NotEmpty(t, markEvents, "the Machine %s was never marked by a MachineHealthCheck (no MachineMarkedUnhealthy event)", old.Name)
	if marked == 0 {
		at := markEvents[0].FirstTimestamp.Time
		if at.IsZero() {
			at = markEvents[0].EventTime.Time
		}
		require.False(t, at.IsZero(), "MachineMarkedUnhealthy event without a time: %+v", markEvents[0])
		marked = at.Sub(start)
		t.Logf("TIMING %-40s %6.1fs (the event's time: the watch missed the condition)", "unhealthy mark → MHC marks the Machine", marked.Seconds())
	}
	require.GreaterOrEqual(t, marked, autoHealTimeout-time.Second, "remediated before the node was unhealthy for %s", autoHealTimeout)

	// Magnum: the cluster never left CREATE_COMPLETE, is HEALTHY again, and still has one worker.
	c = magnum.waitHealth(2*time.Minute, "HEALTHY")
	magnum.report()
	unhealthy := magnum.became("UNHEALTHY", "")
	require.NotZero(t, unhealthy, "Magnum never reported the cluster UNHEALTHY while a worker's node was down")
	require.Less(t, unhealthy, marked, "Magnum showed UNHEALTHY only after the MachineHealthCheck acted")
	t.Logf("TIMING %-40s %6.1fs (10 s polls)", "unhealthy mark → Magnum UNHEALTHY", unhealthy.Seconds())
	t.Logf("TIMING %-40s %6.1fs (10 s polls)", "unhealthy mark → Magnum HEALTHY again", magnum.became("HEALTHY", "UNHEALTHY").Seconds())
	require.Equal(t, 1, c.NodeCount)
	ng, err := showNodeGroup(t, id, "default-worker")
	require.NoError(t, err)
	require.Equal(t, 1, ng.NodeCount)
	require.Equal(t, "CREATE_COMPLETE", ng.Status)
	workers := workerMachines(t, c.StackID)
	require.Len(t, workers, 1)
	require.Equal(t, replacement, workers[0].Name)
	nodes := workloadNodes(t, id)
	require.Len(t, nodes, 2, "control plane and the replacement worker: %v", nodes)
	require.NotContains(t, nodes, node)
	require.Contains(t, nodes, workers[0].Status.NodeRef.Name)
}

// TestAutoHealingDisabledKeepsUnhealthyWorker: with auto_healing_enabled=false the cluster has no
// MachineHealthCheck, so a worker whose node is not Ready stays past the health check's timeout; Magnum
// reports the cluster UNHEALTHY and leaves its status alone.
func TestAutoHealingDisabledKeepsUnhealthyWorker(t *testing.T) {
	requireStack(t)
	t.Parallel()
	id, c := createOneWorkerCluster(t, "noheal-", "--labels", "auto_healing_enabled=false,"+autoHealLabel)

	require.Empty(t, machineHealthChecks(t, c.StackID), "auto_healing_enabled=false must leave the cluster without MachineHealthChecks")
	class := clusterClassOf(t, c.StackID)
	for _, md := range class.Spec.Workers.MachineDeployments {
		require.Empty(t, md.HealthCheck.Checks.UnhealthyNodeConditions, "worker class %s has a health check", md.Class)
	}

	kc := workloadKubeconfig(t, id)
	old := onlyWorker(t, c.StackID)
	node := old.Status.NodeRef.Name
	events := watchWorkerMachines(t, c.StackID)
	start := time.Now()
	setNodeReady(t, kc, node, corev1.ConditionFalse)

	// Longer than a MachineHealthCheck would wait, with a minute for it to act: no Machine may be
	// created, marked or deleted.
	magnum := newMagnumWatch(t, id, start)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for wait := time.After(autoHealTimeout + time.Minute); ; {
		select {
		case ev := <-events:
			m, at := ev.Machine, ev.At.Sub(start).Round(time.Second)
			if ev.Type == "ERROR" {
				t.Logf("machine watch: %s (opened again)", ev.Err)
				continue
			}
			require.Equal(t, old.Name, m.Name, "a worker was added %s after the node went unhealthy", at)
			require.NotEqual(t, "DELETED", ev.Type, "the unhealthy worker was deleted after %s", at)
			require.Nil(t, m.DeletionTimestamp, "the unhealthy worker is being deleted after %s", at)
			require.False(t, conditionIs(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition, metav1.ConditionFalse),
				"the worker was marked unhealthy after %s", at)
			continue
		case <-tick.C:
			magnum.poll()
			continue
		case <-wait:
		}
		break
	}
	timed(t, "unhealthy worker kept (no MachineHealthCheck)", start)
	require.Empty(t, markedUnhealthyEvents(t, old))
	workers := workerMachines(t, c.StackID)
	require.Len(t, workers, 1)
	require.Equal(t, old.Name, workers[0].Name)
	// Nothing put the node back to Ready behind the test's back (the in-memory backend creates Nodes
	// but never rewrites their conditions), so the wait above really had an unhealthy node.
	require.Equal(t, corev1.ConditionFalse, nodeReady(t, kc, node))
	c = magnum.waitHealth(time.Minute, "UNHEALTHY")
	magnum.report()
	t.Logf("TIMING %-40s %6.1fs (10 s polls)", "unhealthy mark → Magnum UNHEALTHY", magnum.became("UNHEALTHY", "").Seconds())
	require.Equal(t, 1, c.NodeCount)
	ng, err := showNodeGroup(t, id, "default-worker")
	require.NoError(t, err)
	require.Equal(t, 1, ng.NodeCount)
}

// createOneWorkerCluster creates a cluster with one control-plane node and one worker through the CLI
// and waits until it is CREATE_COMPLETE and HEALTHY.
func createOneWorkerCluster(t *testing.T, prefix string, extra ...string) (string, *clusterShow) {
	t.Helper()
	tmpl := createTemplate(t, cloudDemo)
	start := time.Now()
	id := createCluster(t, cloudDemo, tmpl, prefix+testutil.RandomHex(3), append([]string{"--node-count", "1"}, extra...)...)
	c := waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")
	timed(t, "create (1 control plane, 1 worker)", start)
	require.Equal(t, "HEALTHY", c.HealthStatus, "%v", c.HealthStatusReason)
	return id, c
}

// kubectlJSON runs kubectl and decodes its standard output (warnings on stderr stay out of the JSON).
func kubectlJSON(t *testing.T, kubeconfig string, into any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout=20s"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "kubectl %s: %s", strings.Join(args, " "), errb.String())
	require.NoError(t, json.Unmarshal(out.Bytes(), into), "kubectl %s", strings.Join(args, " "))
}

type machineEvent struct {
	Type    string // ADDED, MODIFIED, DELETED; ERROR when the watch's output could not be read (Err says why)
	Machine clusterv1.Machine
	At      time.Time
	Err     string
}

// watchWorkerMachines streams every change of the cluster's worker Machines until the test ends
// (the initial list arrives as ADDED). A watch sees states a poll would miss: with an unreachable
// node, CAPI marks, deletes and removes a Machine within a second.
func watchWorkerMachines(t *testing.T, stackID string) <-chan machineEvent {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan machineEvent, 1024)
	send := func(ev machineEvent) {
		select {
		case ch <- ev:
		case <-ctx.Done():
		}
	}
	go func() {
		// A watch the API server closes (its request timeout), or whose output cannot be read, is
		// opened again; its first list brings back what happened meanwhile.
		for ctx.Err() == nil {
			runCtx, stop := context.WithCancel(ctx)
			cmd := exec.CommandContext(runCtx, kubectlBin, "--kubeconfig", mgmtKubeconfig, "get", "machines.cluster.x-k8s.io",
				"-A", "-l", clusterv1.ClusterNameLabel+"="+stackID+",!"+clusterv1.MachineControlPlaneLabel,
				"-o", "json", "--watch", "--output-watch-events")
			stdout, err := cmd.StdoutPipe()
			if err == nil {
				err = cmd.Start()
			}
			if err != nil {
				stop()
				send(machineEvent{Type: "ERROR", At: time.Now(), Err: err.Error()})
				time.Sleep(time.Second)
				continue
			}
			dec := json.NewDecoder(stdout)
			for {
				var ev struct {
					Type   string            `json:"type"`
					Object clusterv1.Machine `json:"object"`
				}
				if err := dec.Decode(&ev); err != nil {
					if !errors.Is(err, io.EOF) && ctx.Err() == nil {
						send(machineEvent{Type: "ERROR", At: time.Now(), Err: "reading kubectl's watch: " + err.Error()})
					}
					break
				}
				send(machineEvent{Type: ev.Type, Machine: ev.Object, At: time.Now()})
			}
			// kubectl may still be watching (its output was unreadable): stop it before waiting for it.
			stop()
			_ = cmd.Wait()
		}
	}()
	return ch
}

// markedUnhealthyEvents are the events a MachineHealthCheck records when it marks the Machine.
func markedUnhealthyEvents(t *testing.T, m clusterv1.Machine) []corev1.Event {
	t.Helper()
	var l corev1.EventList
	kubectlJSON(t, mgmtKubeconfig, &l, "-n", m.Namespace, "get", "events", "-o", "json",
		"--field-selector", "reason=MachineMarkedUnhealthy,involvedObject.name="+m.Name)
	return l.Items
}

// workerMachines are the cluster's worker Machines in the management cluster.
func workerMachines(t *testing.T, stackID string) []clusterv1.Machine {
	t.Helper()
	var l clusterv1.MachineList
	kubectlJSON(t, mgmtKubeconfig, &l, "get", "machines.cluster.x-k8s.io", "-A", "-o", "json",
		"-l", clusterv1.ClusterNameLabel+"="+stackID+",!"+clusterv1.MachineControlPlaneLabel)
	return l.Items
}

func onlyWorker(t *testing.T, stackID string) clusterv1.Machine {
	t.Helper()
	workers := workerMachines(t, stackID)
	require.Len(t, workers, 1)
	w := workers[0]
	require.Equal(t, string(clusterv1.MachinePhaseRunning), w.Status.Phase)
	require.NotEmpty(t, w.Status.NodeRef.Name, "worker %s has no node", w.Name)
	return w
}

// machineHealthChecks are the MachineHealthChecks that watch the cluster's machines.
func machineHealthChecks(t *testing.T, stackID string) []clusterv1.MachineHealthCheck {
	t.Helper()
	var l clusterv1.MachineHealthCheckList
	kubectlJSON(t, mgmtKubeconfig, &l, "get", "machinehealthchecks.cluster.x-k8s.io", "-A", "-o", "json")
	var out []clusterv1.MachineHealthCheck
	for _, m := range l.Items {
		if m.Spec.ClusterName == stackID {
			out = append(out, m)
		}
	}
	return out
}

func clusterClassOf(t *testing.T, stackID string) clusterv1.ClusterClass {
	t.Helper()
	var l clusterv1.ClusterList
	kubectlJSON(t, mgmtKubeconfig, &l, "get", "clusters.cluster.x-k8s.io", "-A", "-o", "json",
		"--field-selector", "metadata.name="+stackID)
	require.Len(t, l.Items, 1)
	var cc clusterv1.ClusterClass
	kubectlJSON(t, mgmtKubeconfig, &cc, "-n", l.Items[0].Namespace, "get", "clusterclasses.cluster.x-k8s.io",
		l.Items[0].Spec.Topology.ClassRef.Name, "-o", "json")
	return cc
}

// setNodeReady sets the node's Ready condition as a dead kubelet's node would show it. CAPD's
// in-memory API server serves no status subresource (its routes end at /{resource}/{name}) and keeps
// status in the object itself, so when the subresource is refused the object is patched; a JSON merge
// patch replaces the list, so every condition is sent.
func setNodeReady(t *testing.T, kubeconfig, name string, status corev1.ConditionStatus) {
	t.Helper()
	var n corev1.Node
	kubectlJSON(t, kubeconfig, &n, "get", "node", name, "-o", "json")
	now := time.Now().UTC().Format(time.RFC3339)
	found := false
	var conds []map[string]any
	for _, c := range n.Status.Conditions {
		m := map[string]any{"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339)}
		if c.Type == corev1.NodeReady {
			found = true
			m["status"], m["reason"], m["message"], m["lastTransitionTime"] = status, "NodeStatusUnknown",
				"set by the e2e test: Kubelet stopped posting node status.", now
			if status == corev1.ConditionFalse {
				m["reason"], m["message"] = "KubeletNotReady", "set by the e2e test: container runtime is down."
			}
		}
		conds = append(conds, m)
	}
	require.True(t, found, "node %s has no Ready condition", name)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	require.NoError(t, err)
	out, err := kubectl(t, kubeconfig, "patch", "node", name, "--subresource=status", "--type=merge", "-p", string(patch))
	if err != nil {
		t.Logf("status subresource refused (%s); patching the Node object", strings.TrimSpace(out))
		out, err = kubectl(t, kubeconfig, "patch", "node", name, "--type=merge", "-p", string(patch))
	}
	require.NoError(t, err, out)
	require.Equal(t, status, nodeReady(t, kubeconfig, name), "the patch did not change node %s", name)
}

func nodeReady(t *testing.T, kubeconfig, name string) corev1.ConditionStatus {
	t.Helper()
	var n corev1.Node
	kubectlJSON(t, kubeconfig, &n, "get", "node", name, "-o", "json")
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func conditionIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == status
		}
	}
	return false
}

// magnumWatch samples what Magnum shows of a cluster while CAPI works on it, as a tenant polling
// `coe cluster show` would: the status must stay CREATE_COMPLETE throughout, and every change of
// health is recorded with the time the response showing it arrived.
type magnumWatch struct {
	t      *testing.T
	id     string
	start  time.Time
	cur    *clusterShow
	states []magnumState
}

type magnumState struct {
	at, took time.Duration // since the mark, when the response arrived; how long the CLI took
	health   string
	line     string
}

func newMagnumWatch(t *testing.T, id string, start time.Time) *magnumWatch {
	return &magnumWatch{t: t, id: id, start: start}
}

func (w *magnumWatch) poll() {
	w.t.Helper()
	begin := time.Now()
	c, err := showCluster(w.t, cloudDemo, w.id)
	require.NoError(w.t, err)
	w.cur = c
	require.Equal(w.t, "CREATE_COMPLETE", c.Status, "Magnum status changed while CAPI healed: %s", c.StatusReason)
	reason, _ := json.Marshal(c.HealthStatusReason)
	line := fmt.Sprintf("%s %s %s", c.Status, c.HealthStatus, reason)
	if n := len(w.states); n == 0 || w.states[n-1].line != line {
		w.states = append(w.states, magnumState{at: time.Since(w.start), took: time.Since(begin), health: c.HealthStatus, line: line})
	}
}

// waitHealth returns the cluster once it shows the health, polling only if the last response did not.
func (w *magnumWatch) waitHealth(timeout time.Duration, want string) *clusterShow {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for w.cur == nil || w.cur.HealthStatus != want {
		if time.Now().After(deadline) {
			w.report()
			w.t.Fatalf("cluster %s not %s within %s: %s %v", w.id, want, timeout, w.cur.HealthStatus, w.cur.HealthStatusReason)
		}
		w.poll()
		if w.cur.HealthStatus != want {
			time.Sleep(3 * time.Second)
		}
	}
	return w.cur
}

// became is when a response first showed the cluster with the health after having shown it with
// another one (or first at all); zero if never.
func (w *magnumWatch) became(health string, after string) time.Duration {
	seenAfter := after == ""
	for _, s := range w.states {
		if s.health == after {
			seenAfter = true
		}
		if seenAfter && s.health == health {
			return s.at
		}
	}
	return 0
}

func (w *magnumWatch) report() {
	for _, s := range w.states {
		w.t.Logf("MAGNUM [+%5.1fs, CLI %4.1fs] %s", s.at.Seconds(), s.took.Seconds(), s.line)
	}
}
