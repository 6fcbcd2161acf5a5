// Package tenantapi reconciles MagnumCluster objects (v1alpha1) through magnum-api with the
// tenant's own application credential. Decide and StatusOf are pure: what magnum-api shows and the
// object's spec go in, the next Magnum action and the object's status come out; the reconciler
// only reads and acts.
package tenantapi

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/clusters"
	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/nodegroups"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

// Finalizer holds a MagnumCluster until Magnum says its cluster is gone.
const Finalizer = "coe.magnum.openstack.org/magnum-cluster"

// ConditionReady is the object's one condition.
const ConditionReady = "Ready"

// Reasons of the Ready condition besides Magnum's own statuses (CREATE_COMPLETE, UPDATE_FAILED, …).
const (
	ReasonCreating           = "Creating"
	ReasonCreateRequested    = "CreateRequested"
	ReasonGone               = "Gone"
	ReasonDeleting           = "Deleting"
	ReasonDrift              = "Drift"
	ReasonCredentialMissing  = "CredentialMissing"
	ReasonCredentialRejected = "CredentialRejected"
	ReasonMagnumRefused      = "MagnumRefused"
	ReasonMagnumUnreachable  = "MagnumUnreachable"
)

// Magnum is what magnum-api shows the project of the object's cluster.
type Magnum struct {
	// Cluster is nil when the project has no cluster of the object's name.
	Cluster    *clusters.Cluster
	NodeGroups []nodegroups.NodeGroup
	// TemplateID is the uuid of the spec's cluster template ("" when not resolved).
	TemplateID string
}

// ActionKind is a Magnum request.
type ActionKind string

const (
	ActNone            ActionKind = ""
	ActCreate          ActionKind = "create"
	ActDelete          ActionKind = "delete"
	ActForget          ActionKind = "forget" // the cluster is gone: release the finalizer
	ActUpgrade         ActionKind = "upgrade"
	ActResize          ActionKind = "resize"
	ActCreateNodeGroup ActionKind = "create node group"
	ActUpdateNodeGroup ActionKind = "update node group"
	ActDeleteNodeGroup ActionKind = "delete node group"
)

// Action is the one Magnum request a reconcile makes: Magnum runs one operation per cluster at a
// time, and the next reconcile follows the status it leaves.
type Action struct {
	Kind ActionKind
	// NodeGroup names the node group of a resize ("": the default workers) or node-group action.
	NodeGroup string
	NodeCount int
	// Min and Max are a node group's autoscaling bounds (create and update).
	Min, Max *int
	// Why is the drift or spec change the action answers, for the log.
	Why string
}

// CreateGrace is how long a requested create may take to show in magnum-api (the conductor makes
// the row once it takes the cast) before it is requested again.
const CreateGrace = 5 * time.Minute

// Decide is the next Magnum request for obj given what magnum-api shows at now, and the
// differences between the two (status.drift). Nothing is requested while an operation runs or
// after a failed one: a failure needs the tenant (a changed spec is tried again). A cluster is
// never created twice: not while a create it requested may still show up, and not after the
// cluster it made is gone (deleted outside: the tenant deletes the object or applies it anew).
func Decide(obj *v1alpha1.MagnumCluster, m Magnum, now time.Time) (Action, []string) {
	if obj.DeletionTimestamp != nil {
		switch {
		case m.Cluster == nil && createPending(obj, now):
			return Action{}, nil // a create may still show up: deleted then, not left behind
		case m.Cluster == nil:
			return Action{Kind: ActForget}, nil
		case m.Cluster.Status == string(magnum.StatusDeleteInProgress):
			return Action{}, nil
		}
		return Action{Kind: ActDelete, Why: "the object is being deleted"}, nil
	}
	if m.Cluster == nil {
		if obj.Status.UUID != "" {
			if obj.Status.Status == "" {
				return Action{}, nil // created, not yet taken up by the conductor
			}
			return Action{}, []string{"cluster " + obj.Status.UUID + " is gone from Magnum; delete the object, or apply it again under a new name, to create another"}
		}
		if createPending(obj, now) {
			return Action{}, nil
		}
		return Action{Kind: ActCreate, Why: "no cluster of this name in the project"}, nil
	}
	drift, actions := compare(obj, m)
	st := magnum.ClusterStatus(m.Cluster.Status)
	if !st.IsComplete() || len(actions) == 0 || busyNodeGroup(m.NodeGroups) {
		return Action{}, drift
	}
	return actions[0], drift
}

// createPending reports whether the object asked for a create that magnum-api does not show yet,
// within CreateGrace.
func createPending(obj *v1alpha1.MagnumCluster, now time.Time) bool {
	c := meta.FindStatusCondition(obj.Status.Conditions, ConditionReady)
	return c != nil && c.Reason == ReasonCreateRequested && now.Sub(c.LastTransitionTime.Time) < CreateGrace
}

// compare lists the drift and the actions that end it, in the order they are taken: the template
// first (an upgrade replaces every node anyway), then the default workers, then node groups.
func compare(obj *v1alpha1.MagnumCluster, m Magnum) (drift []string, actions []Action) {
	spec := obj.Spec
	if m.TemplateID != "" && m.TemplateID != m.Cluster.ClusterTemplateID {
		d := fmt.Sprintf("clusterTemplate: %s in Magnum, %s (%s) in the spec", m.Cluster.ClusterTemplateID, spec.ClusterTemplate, m.TemplateID)
		drift = append(drift, d)
		actions = append(actions, Action{Kind: ActUpgrade, Why: d})
	}
	workers := defaultWorkers(m)
	if want := int(spec.NodeCount); want > 0 && workers != want {
		d := fmt.Sprintf("nodeCount: %d in Magnum, %d in the spec", workers, want)
		drift = append(drift, d)
		actions = append(actions, Action{Kind: ActResize, NodeCount: want, Why: d})
	}
	byName := map[string]nodegroups.NodeGroup{}
	for _, g := range m.NodeGroups {
		byName[g.Name] = g
	}
	for _, want := range spec.NodeGroups {
		field := "nodeGroups[" + want.Name + "]"
		got, ok := byName[want.Name]
		if !ok {
			d := field + ": not in Magnum"
			drift = append(drift, d)
			actions = append(actions, Action{Kind: ActCreateNodeGroup, NodeGroup: want.Name, NodeCount: int(want.NodeCount),
				Min: intPtr(want.MinNodeCount), Max: intPtr(want.MaxNodeCount), Why: d})
			continue
		}
		if got.NodeCount != int(want.NodeCount) {
			d := fmt.Sprintf("%s.nodeCount: %d in Magnum, %d in the spec", field, got.NodeCount, want.NodeCount)
			drift = append(drift, d)
			actions = append(actions, Action{Kind: ActResize, NodeGroup: want.Name, NodeCount: int(want.NodeCount), Why: d})
		}
		if min, max := boundsDrift(got, want); min || max {
			var d []string
			if min {
				d = append(d, fmt.Sprintf("%s.minNodeCount: %d in Magnum, %d in the spec", field, got.MinNodeCount, deref(want.MinNodeCount)))
			}
			if max {
				d = append(d, fmt.Sprintf("%s.maxNodeCount: %s in Magnum, %s in the spec", field, optInt(got.MaxNodeCount), optInt32(want.MaxNodeCount)))
			}
			drift = append(drift, d...)
			actions = append(actions, Action{Kind: ActUpdateNodeGroup, NodeGroup: want.Name,
				Min: intPtr(want.MinNodeCount), Max: intPtr(want.MaxNodeCount), Why: strings.Join(d, "; ")})
		}
	}
	for _, g := range m.NodeGroups {
		if g.IsDefault || g.Role == "master" || slices.ContainsFunc(spec.NodeGroups, func(s v1alpha1.NodeGroupSpec) bool { return s.Name == g.Name }) {
			continue
		}
		field := "nodeGroups[" + g.Name + "]"
		if owned(obj, g.Name) {
			d := field + ": removed from the spec"
			drift = append(drift, d)
			actions = append(actions, Action{Kind: ActDeleteNodeGroup, NodeGroup: g.Name, Why: d})
			continue
		}
		drift = append(drift, field+": in Magnum, not in the spec; left alone (list it to manage it)")
	}
	return drift, actions
}

// defaultWorkers is the node count of the default worker node group (the cluster's node_count
// when magnum-api listed no node groups).
func defaultWorkers(m Magnum) int {
	for _, g := range m.NodeGroups {
		if g.IsDefault && g.Role != "master" {
			return g.NodeCount
		}
	}
	return m.Cluster.NodeCount
}

func busyNodeGroup(groups []nodegroups.NodeGroup) bool {
	return slices.ContainsFunc(groups, func(g nodegroups.NodeGroup) bool {
		return magnum.ClusterStatus(g.Status).IsInProgress()
	})
}

// boundsDrift says whether a node group's autoscaling bounds differ from the spec's; a bound the
// spec leaves out is not owned.
func boundsDrift(got nodegroups.NodeGroup, want v1alpha1.NodeGroupSpec) (min, max bool) {
	min = want.MinNodeCount != nil && got.MinNodeCount != int(*want.MinNodeCount)
	max = want.MaxNodeCount != nil && (got.MaxNodeCount == nil || *got.MaxNodeCount != int(*want.MaxNodeCount))
	return min, max
}

// owned reports whether the object manages a node group: created from its spec before.
func owned(obj *v1alpha1.MagnumCluster, name string) bool {
	return slices.ContainsFunc(obj.Status.NodeGroups, func(g v1alpha1.NodeGroupStatus) bool { return g.Name == name && g.Owned })
}

// KnownStatus is the status when a reconcile could not read Magnum or was refused (a missing or
// rejected credential, a refused request), or has just asked for a create: what was last known of
// the cluster, with Ready False for reason.
func KnownStatus(obj *v1alpha1.MagnumCluster, reason, message string) v1alpha1.MagnumClusterStatus {
	st := *obj.Status.DeepCopy()
	st.ObservedGeneration = obj.Generation
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse,
		ObservedGeneration: obj.Generation, Reason: reason, Message: message})
	return st
}

// StatusOf is the object's status for what magnum-api shows and the drift Decide found.
func StatusOf(obj *v1alpha1.MagnumCluster, m Magnum, drift []string) v1alpha1.MagnumClusterStatus {
	st := v1alpha1.MagnumClusterStatus{
		ObservedGeneration: obj.Generation,
		Conditions:         slices.Clone(obj.Status.Conditions),
		Drift:              drift,
		UUID:               obj.Status.UUID,
	}
	if c := m.Cluster; c != nil {
		st.UUID, st.Status, st.StatusReason = c.UUID, c.Status, c.StatusReason
		st.APIAddress, st.COEVersion, st.HealthStatus = c.APIAddress, c.COEVersion, c.HealthStatus
		st.MasterCount, st.NodeCount = int32(c.MasterCount), int32(defaultWorkers(m))
		st.ClusterTemplateID = c.ClusterTemplateID
		for _, g := range m.NodeGroups {
			inSpec := slices.ContainsFunc(obj.Spec.NodeGroups, func(s v1alpha1.NodeGroupSpec) bool { return s.Name == g.Name })
			st.NodeGroups = append(st.NodeGroups, v1alpha1.NodeGroupStatus{Name: g.Name, UUID: g.UUID, Role: g.Role,
				NodeCount: int32(g.NodeCount), Status: g.Status, Owned: !g.IsDefault && (inSpec || owned(obj, g.Name))})
		}
		sort.Slice(st.NodeGroups, func(i, j int) bool { return st.NodeGroups[i].Name < st.NodeGroups[j].Name })
	}
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: obj.Generation}
	switch {
	case m.Cluster == nil && obj.Status.UUID == "" || m.Cluster == nil && obj.Status.Status == "":
		// Not (yet) in Magnum: a requested create stays on record, deleted or not, until it shows.
		ready.Reason, ready.Message = ReasonCreating, "the cluster is being created in Magnum"
		if c := meta.FindStatusCondition(obj.Status.Conditions, ConditionReady); c != nil && c.Reason == ReasonCreateRequested {
			ready.Reason, ready.Message = c.Reason, c.Message
		}
	case obj.DeletionTimestamp != nil:
		ready.Reason, ready.Message = ReasonDeleting, "the cluster is being deleted in Magnum"
	case m.Cluster == nil:
		ready.Reason, ready.Message = ReasonGone, strings.Join(drift, "; ")
	default:
		status := magnum.ClusterStatus(m.Cluster.Status)
		ready.Reason, ready.Message = conditionReason(m.Cluster.Status), m.Cluster.StatusReason
		if ready.Message == "" {
			ready.Message = "Magnum reports " + m.Cluster.Status
		}
		actionable := slices.DeleteFunc(slices.Clone(drift), func(d string) bool { return strings.HasSuffix(d, "left alone (list it to manage it)") })
		switch {
		case status.IsComplete() && len(actionable) > 0:
			ready.Reason, ready.Message = ReasonDrift, "Magnum differs from the spec, being reconciled: "+strings.Join(actionable, "; ")
		case status.IsComplete():
			ready.Status = metav1.ConditionTrue
		}
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// conditionReason is a Magnum status as a condition reason (those allow letters, digits and _).
func conditionReason(status string) string {
	if status == "" {
		return "Unknown"
	}
	return status
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	i := int(*v)
	return &i
}

func deref(v *int32) int32 {
	if v == nil {
		return 0
	}
	return *v
}

func optInt(v *int) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(*v)
}

func optInt32(v *int32) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(*v)
}
