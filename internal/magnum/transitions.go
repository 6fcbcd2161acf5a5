package magnum

// Operation names a conductor operation by its RPC method.
type Operation string

// The operations that change a cluster's status.
const (
	OpClusterCreate    Operation = "cluster_create"
	OpClusterUpdate    Operation = "cluster_update"
	OpClusterResize    Operation = "cluster_resize"
	OpClusterUpgrade   Operation = "cluster_upgrade"
	OpClusterDelete    Operation = "cluster_delete"
	OpNodeGroupCreate  Operation = "nodegroup_create"
	OpNodeGroupUpdate  Operation = "nodegroup_update"
	OpNodeGroupDelete  Operation = "nodegroup_delete"
	OpCredentialRotate Operation = "credential_rotate"
	// OpRenderingMove is the bridge's own: an operator moves a live cluster to the running bridge's
	// rendering (magnum-api never sends it).
	OpRenderingMove Operation = "bridge_rendering_move"
)

// Transition is one operation's row: the statuses it may start from and the cluster statuses it
// writes. The conductor guards with From and writes InProgress; the status translation in package
// capi moves InProgress on to Complete or Failed.
type Transition struct {
	// From are the statuses the operation is accepted in (nodegroup_update: the node group's, the
	// others: the cluster's); nil: any.
	From       []ClusterStatus
	InProgress ClusterStatus
	Complete   ClusterStatus
	Failed     ClusterStatus
	// NodeGroup is the status written on the node groups the operation creates or changes (empty:
	// none); they end with the cluster, as the same operation's *_COMPLETE or *_FAILED.
	NodeGroup ClusterStatus
}

// Guard sets shared by several operations, as magnum-api and Magnum's conductor define them.
var (
	// CompleteStatuses is the "*_COMPLETE" set of cluster_update, cluster_upgrade and
	// rotate_ca_certificate: every *_COMPLETE except DELETE_COMPLETE.
	CompleteStatuses = []ClusterStatus{
		StatusCreateComplete, StatusUpdateComplete, StatusResumeComplete, StatusRestoreComplete,
		StatusRollbackComplete, StatusSnapshotComplete, StatusCheckComplete, StatusAdoptComplete,
	}
	// ResizeAllowedStatuses: a resize or node group change also runs while a previous update is in
	// flight or has failed, so a stuck update can be corrected.
	ResizeAllowedStatuses = append(append([]ClusterStatus{}, CompleteStatuses...), StatusUpdateFailed, StatusUpdateInProgress)
	// NodeGroupAllowedStatuses is ALLOWED_NODEGROUP_STATES (nodegroup_create/update guard).
	NodeGroupAllowedStatuses = ResizeAllowedStatuses
	// CredentialRotateAllowedStatuses guards credential_rotate (21.0.0+).
	CredentialRotateAllowedStatuses = ResizeAllowedStatuses
)

func updating(from []ClusterStatus, group ClusterStatus) Transition {
	return Transition{From: from, InProgress: StatusUpdateInProgress, Complete: StatusUpdateComplete, Failed: StatusUpdateFailed,
		NodeGroup: group}
}

// Transitions is the status table: which operation is accepted from which status and what it
// writes. For the cluster every operation other than create and delete is an update.
var Transitions = map[Operation]Transition{
	OpClusterCreate: {InProgress: StatusCreateInProgress, Complete: StatusCreateComplete, Failed: StatusCreateFailed,
		NodeGroup: StatusCreateInProgress},
	OpClusterUpdate:    updating(CompleteStatuses, StatusUpdateInProgress),
	OpClusterResize:    updating(ResizeAllowedStatuses, StatusUpdateInProgress),
	OpClusterUpgrade:   updating(CompleteStatuses, StatusUpdateInProgress),
	OpNodeGroupCreate:  updating(NodeGroupAllowedStatuses, StatusCreateInProgress),
	OpNodeGroupUpdate:  updating(NodeGroupAllowedStatuses, StatusUpdateInProgress),
	OpNodeGroupDelete:  updating(nil, StatusDeleteInProgress),
	OpCredentialRotate: updating(CredentialRotateAllowedStatuses, ""),
	OpRenderingMove:    updating(CompleteStatuses, ""),
	OpClusterDelete: {InProgress: StatusDeleteInProgress, Complete: StatusDeleteComplete, Failed: StatusDeleteFailed,
		NodeGroup: StatusDeleteInProgress},
}

// Allowed reports whether op may start from status s.
func (op Operation) Allowed(s ClusterStatus) bool {
	t := Transitions[op]
	return t.From == nil || StatusIn(s, t.From)
}

// Outcome is the row of the operation whose in-progress status s is (ok false: s is not in
// progress). Operations sharing an in-progress status share its outcomes.
func Outcome(s ClusterStatus) (t Transition, ok bool) {
	for _, t := range Transitions {
		if t.InProgress == s {
			return t, true
		}
	}
	return Transition{}, false
}

// CompleteOf is what the in-progress status s becomes when its operation succeeds (s itself when
// it is not in progress).
func CompleteOf(s ClusterStatus) ClusterStatus {
	if t, ok := Outcome(s); ok {
		return t.Complete
	}
	return s
}

// FailedOf is what the in-progress status s becomes when its operation fails (s itself when it is
// not in progress).
func FailedOf(s ClusterStatus) ClusterStatus {
	if t, ok := Outcome(s); ok {
		return t.Failed
	}
	return s
}

// Writes reports whether s is one of the statuses the row writes.
func (t Transition) Writes(s ClusterStatus) bool {
	return s != "" && (s == t.InProgress || s == t.Complete || s == t.Failed)
}

// Deleting reports whether s is a status of a delete (in progress, complete or failed).
func Deleting(s ClusterStatus) bool { return Transitions[OpClusterDelete].Writes(s) }
