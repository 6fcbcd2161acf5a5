// Package capi applies rendered objects to the management cluster and turns what Cluster API reports
// back into Magnum state. The translation (this file) is a pure function of its inputs, so it is
// tested with tables; the watch and apply code around it only moves data.
package capi

import (
	"cmp"
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Observation is what Cluster API says about one cluster.
type Observation struct {
	Cluster            *clusterv1.Cluster
	MachineDeployments []clusterv1.MachineDeployment
	Machines           []clusterv1.Machine
	// MachineSets are read only from the apiserver itself (Client.Observe), nil from the watch: a
	// MachineDeployment that has taken in a new template may report its old machines up to date for
	// a moment, until their MachineSet is reconciled; a MachineSet of an old template still holding
	// machines says the rollout has not ended.
	MachineSets []clusterv1.MachineSet
	// AddonBinding and AddonSet are the cluster's ClusterResourceSetBinding and the add-on set its
	// annotation names (addons.AnnotationAddonSet); nil until they exist.
	AddonBinding *addonsv1.ClusterResourceSetBinding
	AddonSet     *addonsv1.ClusterResourceSet
	// CloudFailures are the infrastructure provider's refusals ("<Kind> <name>: <message>", e.g.
	// Nova's quota message on an OpenStackServer), which the Machines do not carry.
	CloudFailures []string
	// Autoscaler is the cluster's cluster-autoscaler Deployment (internal/autoscaler), from the
	// watch; nil when there is none.
	Autoscaler *appsv1.Deployment
}

// Current is the Magnum side as stored.
type Current struct {
	Status magnum.ClusterStatus
	// StatusReason is the stored reason: a *_FAILED reason stays until the next operation.
	StatusReason string
	// Version is the Kubernetes version Magnum asked for (template and labels); empty: not checked.
	Version       string
	CreatedAt     time.Time
	CreateTimeout time.Duration // zero: none
	// Deadline ends an update or delete in progress that CAPI never completes (zero: none);
	// DeadlineName says which setting it comes from, e.g. "update_timeout of 1h0m0s".
	Deadline     time.Time
	DeadlineName string
	NodeGroups   []NodeGroupState
}

// NodeGroupState is one node group as Magnum stores it, or as it should become.
type NodeGroupState struct {
	UUID          string
	Name          string
	Role          string
	Status        magnum.ClusterStatus
	StatusReason  string
	NodeCount     int
	NodeAddresses []string
	// Autoscaled groups have no fixed size: the autoscaler owns the replicas.
	Autoscaled bool
	// Gone is set in a Decision for a group being deleted whose machines are all gone: its row goes.
	Gone bool
}

// Decision is the Magnum state the observation implies.
type Decision struct {
	Status       magnum.ClusterStatus
	StatusReason string
	APIAddress   string
	COEVersion   string
	Health       magnum.HealthStatus
	HealthReason map[string]string
	NodeGroups   []NodeGroupState
	// Terminal is true when the operation in progress has ended (completed or failed).
	Terminal bool
}

func i32(p *int32) int {
	if p == nil {
		return 0
	}
	return int(*p)
}

// Decide maps an observation to Magnum state. now is passed in so timeouts are testable.
func Decide(cur Current, obs Observation, now time.Time) Decision {
	c := obs.Cluster
	d := Decision{Status: cur.Status, StatusReason: cur.StatusReason}
	if c == nil {
		return d
	}
	if ep := c.Spec.ControlPlaneEndpoint; ep.Host != "" && ep.Port != 0 {
		d.APIAddress = fmt.Sprintf("https://%s:%d", ep.Host, ep.Port)
	}
	d.COEVersion = c.Spec.Topology.Version
	d.Health, d.HealthReason = health(c)
	if cur.Status == magnum.StatusCreateInProgress && d.Health == magnum.HealthUnhealthy {
		// A cluster still being built is not unhealthy, just not known to be healthy yet.
		d.Health = magnum.HealthUnknown
	}
	d.NodeGroups = nodeGroups(cur, obs)

	available := meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.AvailableCondition)
	addonsDone, _ := addonsApplied(obs)
	settled := available && !rollingOut(obs) && reflectsDesired(cur, obs) && addonsDone
	// The statuses an operation ends in come from Magnum's transition table; what ends it differs:
	// a create has its create_timeout, an update and a delete the deadline the conductor passes in,
	// and a delete completes only when the CAPI Cluster is gone (the watch reports that).
	op, _ := magnum.Outcome(cur.Status)
	switch cur.Status {
	case magnum.StatusCreateInProgress:
		switch {
		case settled:
			d.Status, d.StatusReason, d.Terminal = op.Complete, "", true
			setGroupStatus(&d, op, op.Complete)
		case cur.CreateTimeout > 0 && !cur.CreatedAt.IsZero() && now.After(cur.CreatedAt.Add(cur.CreateTimeout)):
			d.Status, d.Terminal = op.Failed, true
			d.StatusReason = fmt.Sprintf("Cluster did not become available within its create_timeout of %s: %s",
				cur.CreateTimeout, RootCause(obs))
			setGroupStatus(&d, op, op.Failed, RootCause(obs))
		default:
			d.StatusReason = Progress(obs)
		}
	case magnum.StatusUpdateInProgress:
		// A move to the running bridge's rendering is written before it is applied: until the
		// Cluster names the new class, the old one settled is not the move done.
		class, moving := MovingTo(cur.StatusReason)
		if moving && c.Spec.Topology.ClassRef.Name != class {
			settled = false
		}
		switch {
		case settled:
			d.Status, d.StatusReason, d.Terminal = op.Complete, "", true
		case pastDeadline(cur, now):
			d.Status, d.Terminal = op.Failed, true
			d.StatusReason = fmt.Sprintf("Cluster API did not converge within the %s: %s; %s", cur.DeadlineName, RootCause(obs), Progress(obs))
			failGroups(&d, d.StatusReason, magnum.StatusCreateInProgress, magnum.StatusUpdateInProgress)
		case moving:
			d.StatusReason = MoveReason(class) + ": " + Progress(obs)
		default:
			d.StatusReason = Progress(obs)
		}
	case magnum.StatusDeleteInProgress:
		if pastDeadline(cur, now) {
			d.Status, d.Terminal = op.Failed, true
			d.StatusReason = fmt.Sprintf("Cluster API did not finish deleting the cluster within the %s: %s", cur.DeadlineName, RootCause(obs))
			failGroups(&d, d.StatusReason, magnum.StatusDeleteInProgress)
		}
	}
	// A node group that was being resized or created is done when its machines are.
	for i := range d.NodeGroups {
		g := &d.NodeGroups[i]
		if settled && (g.Status == magnum.StatusUpdateInProgress || (g.Status == magnum.StatusCreateInProgress && cur.Status != magnum.StatusCreateInProgress)) {
			g.Status = magnum.CompleteOf(g.Status)
			g.StatusReason = ""
		}
	}
	return d
}

// movePrefix starts the status reason of a cluster moving to the running bridge's rendering.
const movePrefix = "moving to this bridge's rendering, class "

// MoveReason is the status reason a move starts with; the status sync keeps it, with the progress,
// until the cluster has rolled to class.
func MoveReason(class string) string { return movePrefix + class }

// MovingTo is the class a status reason says the cluster is moving to.
func MovingTo(reason string) (class string, ok bool) {
	rest, ok := strings.CutPrefix(reason, movePrefix)
	if !ok {
		return "", false
	}
	class, _, _ = strings.Cut(rest, ":")
	return class, class != ""
}

func pastDeadline(cur Current, now time.Time) bool {
	return !cur.Deadline.IsZero() && now.After(cur.Deadline)
}

// failGroups fails the node groups an operation was changing: those in one of the in-progress
// statuses.
func failGroups(d *Decision, reason string, inProgress ...magnum.ClusterStatus) {
	for i := range d.NodeGroups {
		g := &d.NodeGroups[i]
		if magnum.StatusIn(g.Status, inProgress) {
			g.Status = magnum.FailedOf(g.Status)
			g.StatusReason = reason
			g.Gone = false
		}
	}
}

// setGroupStatus ends the node groups in any status of the operation's row.
func setGroupStatus(d *Decision, op magnum.Transition, status magnum.ClusterStatus, reason ...string) {
	for i := range d.NodeGroups {
		if op.Writes(d.NodeGroups[i].Status) {
			d.NodeGroups[i].Status = status
			d.NodeGroups[i].StatusReason = strings.Join(reason, "")
		}
	}
}

// reflectsDesired is true once CAPI has taken in what Magnum asked for: the topology controller has
// reconciled the latest Cluster spec, and every node group has a MachineDeployment of the stored size
// (and groups being deleted have none). Without it an update that was just applied would look
// settled before CAPI even started on it.
func reflectsDesired(cur Current, obs Observation) bool {
	c := obs.Cluster
	reconciled := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
	if c.Status.ObservedGeneration < c.Generation || reconciled == nil || reconciled.Status != metav1.ConditionTrue ||
		(reconciled.ObservedGeneration != 0 && reconciled.ObservedGeneration < c.Generation) {
		return false
	}
	// The watch's cache may still hold the Cluster as it was before the bridge's last apply.
	if cur.Version != "" && c.Spec.Topology.Version != cur.Version {
		return false
	}
	// Every machine runs the cluster's version, and there are no more machines than wanted: an
	// upgrade or resize rolling machines over is not done while an old or surplus machine remains.
	want := 0
	for _, g := range cur.NodeGroups {
		if !magnum.Deleting(g.Status) && !g.Autoscaled {
			want += g.NodeCount
		}
	}
	machines := 0
	for _, m := range obs.Machines {
		if m.DeletionTimestamp != nil {
			return false
		}
		if v := c.Spec.Topology.Version; v != "" && m.Spec.Version != v {
			return false
		}
		machines++
	}
	if !anyAutoscaled(cur) && len(obs.Machines) > 0 && machines > want {
		return false
	}
	mds := map[string]clusterv1.MachineDeployment{}
	for _, md := range obs.MachineDeployments {
		if id := md.Labels[templates.LabelNodeGroupUUID]; id != "" {
			mds[id] = md
		}
	}
	for _, g := range cur.NodeGroups {
		if g.Role == "master" {
			if !controlPlaneConverged(c, obs.Machines, g.NodeCount) {
				return false
			}
			continue
		}
		md, ok := mds[g.UUID]
		if magnum.Deleting(g.Status) {
			if ok {
				return false
			}
			continue
		}
		if !ok || (!g.Autoscaled && i32(md.Spec.Replicas) != g.NodeCount) {
			return false
		}
	}
	return true
}

// controlPlaneConverged is true when the control plane has the stored number of machines, all of
// them ready, and its own status (copied from KubeadmControlPlane, possibly late) agrees. The
// topology's replicas change at once on apply; the machines come one at a time.
func controlPlaneConverged(c *clusterv1.Cluster, machines []clusterv1.Machine, want int) bool {
	if cp := c.Spec.Topology.ControlPlane.Replicas; cp != nil && int(*cp) != want {
		return false
	}
	if st := c.Status.ControlPlane; st != nil && st.DesiredReplicas != nil {
		if i32(st.DesiredReplicas) != want || i32(st.ReadyReplicas) != want {
			return false
		}
	}
	if len(machines) == 0 {
		return true // an observation without machines (the cache lags): the counts above decide
	}
	n := 0
	for _, m := range machines {
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; !ok {
			continue
		}
		if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition) {
			return false
		}
		n++
	}
	return n == want
}

func anyAutoscaled(cur Current) bool {
	for _, g := range cur.NodeGroups {
		if g.Autoscaled {
			return true
		}
	}
	return false
}

// rollingOut is true while CAPI is still converging (scaling or upgrading).
func rollingOut(obs Observation) bool {
	c := obs.Cluster
	for _, t := range []string{clusterv1.ScalingUpCondition, clusterv1.ScalingDownCondition, clusterv1.RollingOutCondition} {
		if meta.IsStatusConditionTrue(c.Status.Conditions, t) {
			return true
		}
	}
	if cp := c.Status.ControlPlane; cp != nil {
		if i32(cp.DesiredReplicas) != i32(cp.AvailableReplicas) || i32(cp.DesiredReplicas) != i32(cp.Replicas) ||
			(cp.UpToDateReplicas != nil && i32(cp.UpToDateReplicas) != i32(cp.DesiredReplicas)) {
			return true
		}
	}
	for _, md := range obs.MachineDeployments {
		if md.Status.ObservedGeneration != 0 && md.Status.ObservedGeneration < md.Generation {
			return true // a new template (a class move) the MachineDeployment has not taken in yet
		}
		if obs.MachineSets != nil && !rolledOver(md, obs.MachineSets) {
			return true
		}
		want := i32(md.Spec.Replicas)
		if i32(md.Status.Replicas) != want || i32(md.Status.AvailableReplicas) != want || i32(md.Status.UpToDateReplicas) != want {
			return true
		}
	}
	if w := c.Status.Workers; w != nil && i32(w.DesiredReplicas) != i32(w.AvailableReplicas) {
		return true
	}
	return false
}

// rolledOver is true when md's machines all belong to a MachineSet of its current template: the
// old template's sets hold none, and a set of the new one exists once any machine is wanted.
func rolledOver(md clusterv1.MachineDeployment, sets []clusterv1.MachineSet) bool {
	current := false
	for _, ms := range sets {
		if ms.Labels[clusterv1.MachineDeploymentNameLabel] != md.Name || (ms.DeletionTimestamp != nil && i32(ms.Status.Replicas) == 0) {
			continue
		}
		if sameTemplate(ms.Spec.Template.Spec, md.Spec.Template.Spec) {
			current = true
		} else if i32(ms.Spec.Replicas) > 0 || i32(ms.Status.Replicas) > 0 {
			return false
		}
	}
	return current || i32(md.Spec.Replicas) == 0
}

// sameTemplate compares what a rollout replaces machines for: the bootstrap and infrastructure
// templates and the version.
func sameTemplate(a, b clusterv1.MachineSpec) bool {
	return a.Bootstrap.ConfigRef.Name == b.Bootstrap.ConfigRef.Name && a.InfrastructureRef.Name == b.InfrastructureRef.Name &&
		a.Version == b.Version
}

// Progress is a one-line status reason while an operation runs, e.g.
// "control plane 1/1 ready, workers 1/2 ready".
func Progress(obs Observation) string {
	c := obs.Cluster
	cpReady, cpWant, wReady, wWant := 0, 0, 0, 0
	if t := c.Spec.Topology.ControlPlane.Replicas; t != nil {
		cpWant = int(*t)
	}
	if cp := c.Status.ControlPlane; cp != nil {
		cpReady = i32(cp.ReadyReplicas)
		if cpWant == 0 {
			cpWant = i32(cp.DesiredReplicas)
		}
	}
	for _, md := range c.Spec.Topology.Workers.MachineDeployments {
		wWant += i32(md.Replicas)
	}
	if w := c.Status.Workers; w != nil {
		wReady = i32(w.ReadyReplicas)
		if d := i32(w.DesiredReplicas); d > wWant {
			wWant = d
		}
	}
	s := fmt.Sprintf("control plane %d/%d ready, workers %d/%d ready", cpReady, cpWant, wReady, wWant)
	if cause := RootCause(obs); cause != "" && cause != noCause {
		s += "; " + cause
	}
	return s
}

const noCause = "no failing condition reported"

// RootCause picks the most specific failing condition a tenant can act on: a machine's own problem
// before the summaries built from it, infrastructure before control plane before workers.
func RootCause(obs Observation) string {
	if c := obs.Cluster; c != nil && ((c.Spec.Paused != nil && *c.Spec.Paused) || meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.PausedCondition)) {
		return "Paused: Cluster API does not reconcile the cluster while it is paused (ask your cloud operator)"
	}
	machines := append([]clusterv1.Machine(nil), obs.Machines...)
	sort.Slice(machines, func(i, j int) bool { return machines[i].Name < machines[j].Name })
	for _, m := range machines {
		//lint:ignore SA1019 CAPI v1.14 still reports a machine's terminal failure only here, until it drops v1beta1
		if dep := m.Status.Deprecated; dep != nil && dep.V1Beta1 != nil && dep.V1Beta1.FailureMessage != nil {
			//lint:ignore SA1019 see above: the failure message is only in the v1beta1 status
			return fmt.Sprintf("machine %s failed: %s", m.Name, *dep.V1Beta1.FailureMessage)
		}
	}
	if f := obs.CloudFailures; len(f) > 0 {
		more := ""
		if len(f) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(f)-1)
		}
		return "the cloud refused: " + f[0] + more
	}
	// Machines whose server exists but whose node never registered: what an image that does not
	// boot (or a node that cannot reach the API) looks like. All are named, with the first one's
	// condition (for OpenStack, CAPO's server id in the providerID the Node would carry).
	var noNode []string
	for _, m := range machines {
		if m.DeletionTimestamp == nil && m.Status.NodeRef.Name == "" && meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition) {
			noNode = append(noNode, m.Name)
		}
	}
	// The condition shown is the first no-node machine's if it has one (for OpenStack: the server id
	// its Node would carry), else the first machine's that explains a wait.
	slices.SortStableFunc(machines, func(a, b clusterv1.Machine) int {
		return cmp.Compare(boolRank(!slices.Contains(noNode, a.Name)), boolRank(!slices.Contains(noNode, b.Name)))
	})
	for _, m := range machines {
		for _, t := range []string{clusterv1.MachineInfrastructureReadyCondition, clusterv1.MachineBootstrapConfigReadyCondition, clusterv1.MachineNodeReadyCondition} {
			if c := meta.FindStatusCondition(m.Status.Conditions, t); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
				cause := fmt.Sprintf("machine %s: %s: %s", m.Name, t, oneLine(c.Message))
				if len(noNode) > 0 {
					cause = fmt.Sprintf("machines provisioned without a node: %s; %s", strings.Join(noNode, ", "), cause)
				}
				return cause
			}
		}
	}
	if len(noNode) > 0 {
		return "machines provisioned without a node: " + strings.Join(noNode, ", ")
	}
	if obs.Cluster != nil {
		if done, why := addonsApplied(obs); !done && meta.IsStatusConditionTrue(obs.Cluster.Status.Conditions, clusterv1.AvailableCondition) {
			return why
		}
		for _, t := range []string{clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterControlPlaneAvailableCondition,
			clusterv1.ClusterWorkersAvailableCondition, clusterv1.ClusterRemoteConnectionProbeCondition, clusterv1.ClusterTopologyReconciledCondition} {
			if c := meta.FindStatusCondition(obs.Cluster.Status.Conditions, t); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
				return fmt.Sprintf("%s: %s", t, oneLine(c.Message))
			}
		}
	}
	return noCause
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// health follows the cluster's Available condition; the reason names each summary, like the
// capi-helm driver's keys, so existing tooling keeps working.
func health(c *clusterv1.Cluster) (magnum.HealthStatus, map[string]string) {
	reason := map[string]string{}
	keys := map[string]string{
		"cluster":        clusterv1.AvailableCondition,
		"infrastructure": clusterv1.ClusterInfrastructureReadyCondition,
		"controlplane":   clusterv1.ClusterControlPlaneAvailableCondition,
		"nodegroup":      clusterv1.ClusterWorkersAvailableCondition,
	}
	for k, t := range keys {
		cond := meta.FindStatusCondition(c.Status.Conditions, t)
		switch {
		case cond == nil:
			reason[k] = "Unknown"
		case cond.Status == metav1.ConditionTrue:
			reason[k] = "Ready"
		default:
			reason[k] = strings.TrimSpace(string(cond.Status) + ": " + oneLine(cond.Message))
		}
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.AvailableCondition)
	switch {
	case cond == nil || cond.Status == metav1.ConditionUnknown:
		return magnum.HealthUnknown, reason
	case cond.Status == metav1.ConditionTrue:
		return magnum.HealthHealthy, reason
	}
	return magnum.HealthUnhealthy, reason
}

// nodeGroups carries addresses and machine counts over to the stored node groups.
func nodeGroups(cur Current, obs Observation) []NodeGroupState {
	byNG := map[string][]string{}
	var cpAddrs []string
	for _, m := range obs.Machines {
		addrs := machineAddresses(m)
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			cpAddrs = append(cpAddrs, addrs...)
			continue
		}
		uuid := m.Labels[templates.LabelNodeGroupUUID]
		byNG[uuid] = append(byNG[uuid], addrs...)
	}
	mdReplicas := map[string]int{}
	hasMD := map[string]bool{}
	for _, md := range obs.MachineDeployments {
		uuid := md.Labels[templates.LabelNodeGroupUUID]
		hasMD[uuid] = uuid != ""
		if uuid != "" && md.Spec.Replicas != nil {
			mdReplicas[uuid] = int(*md.Spec.Replicas)
		}
	}
	hasMachines := map[string]bool{}
	for _, m := range obs.Machines {
		hasMachines[m.Labels[templates.LabelNodeGroupUUID]] = true
	}
	complete := cur.Status.IsComplete()
	out := make([]NodeGroupState, len(cur.NodeGroups))
	for i, g := range cur.NodeGroups {
		out[i] = g
		if g.Role == "master" {
			out[i].NodeAddresses = sorted(cpAddrs)
			continue
		}
		out[i].NodeAddresses = sorted(byNG[g.UUID])
		if magnum.Deleting(g.Status) {
			out[i].Gone = !hasMD[g.UUID] && !hasMachines[g.UUID]
			continue
		}
		// Replica changes made outside Magnum (the autoscaler) show in node_count at once; while an
		// operation of Magnum's own runs, the stored count is the goal and CAPI is catching up to it.
		if n, ok := mdReplicas[g.UUID]; ok && complete && g.Status.IsComplete() {
			out[i].NodeCount = n
		}
	}
	return out
}

// machineAddresses prefers IP addresses (what Magnum's Heat driver reported), then DNS names, then the
// node name, so the field says where a node is even on providers that report no IP.
func machineAddresses(m clusterv1.Machine) []string {
	var ips, names []string
	for _, a := range m.Status.Addresses {
		switch a.Type {
		case clusterv1.MachineAddressType(corev1.NodeInternalIP), clusterv1.MachineAddressType(corev1.NodeExternalIP):
			ips = append(ips, a.Address)
		case clusterv1.MachineAddressType(corev1.NodeInternalDNS), clusterv1.MachineAddressType(corev1.NodeExternalDNS), clusterv1.MachineAddressType(corev1.NodeHostName):
			names = append(names, a.Address)
		}
	}
	switch {
	case len(ips) > 0:
		return ips
	case len(names) > 0:
		return names[:1]
	case m.Status.NodeRef.Name != "":
		return []string{m.Status.NodeRef.Name}
	}
	return nil
}

func sorted(s []string) []string {
	if s == nil {
		return []string{}
	}
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// addonsApplied: a Cluster that names an add-on set is done only once CAPI has applied every
// resource of that set to it (its ClusterResourceSetBinding says so). why names the set and, when
// CAPI failed to apply it, CAPI's message.
func addonsApplied(obs Observation) (done bool, why string) {
	name := obs.Cluster.Annotations[addons.AnnotationAddonSet]
	if name == "" {
		return true, ""
	}
	if b := obs.AddonBinding; b != nil {
		for _, set := range b.Spec.Bindings {
			if set.ClusterResourceSetName != name || len(set.Resources) == 0 {
				continue
			}
			applied := true
			for _, r := range set.Resources {
				applied = applied && r.Applied != nil && *r.Applied
			}
			if applied {
				return true, ""
			}
		}
	}
	if s := obs.AddonSet; s != nil {
		if c := meta.FindStatusCondition(s.Status.Conditions, addonsv1.ClusterResourceSetResourcesAppliedCondition); c != nil &&
			c.Status == metav1.ConditionFalse && c.Message != "" {
			return false, fmt.Sprintf("add-ons (ClusterResourceSet %s) not applied: %s", name, oneLine(c.Message))
		}
	}
	return false, fmt.Sprintf("add-ons (ClusterResourceSet %s) not applied yet", name)
}

// WithNodeGroupsByName is obs with each MachineDeployment and worker Machine that carries no node
// group uuid (a cluster another driver built, which names its topology's MachineDeployments after
// the Magnum node groups) given the uuid of the node group byName names after its topology name.
// The objects are copied: the watch's caches are never written.
func WithNodeGroupsByName(obs Observation, byName map[string]string) Observation {
	label := func(labels map[string]string) map[string]string {
		if labels[templates.LabelNodeGroupUUID] != "" {
			return labels
		}
		uuid, ok := byName[labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]]
		if !ok {
			return labels
		}
		out := make(map[string]string, len(labels)+1)
		maps.Copy(out, labels)
		out[templates.LabelNodeGroupUUID] = uuid
		return out
	}
	mds := make([]clusterv1.MachineDeployment, len(obs.MachineDeployments))
	for i := range obs.MachineDeployments {
		mds[i] = *obs.MachineDeployments[i].DeepCopy()
		mds[i].Labels = label(mds[i].Labels)
	}
	machines := make([]clusterv1.Machine, len(obs.Machines))
	for i := range obs.Machines {
		machines[i] = *obs.Machines[i].DeepCopy()
		machines[i].Labels = label(machines[i].Labels)
	}
	obs.MachineDeployments, obs.Machines = mds, machines
	return obs
}
