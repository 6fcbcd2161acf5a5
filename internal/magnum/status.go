package magnum

import "strings"

// ClusterStatus is magnum.objects.fields.ClusterStatus, used for clusters and nodegroups. magnum-api
// rejects any other string on output (WSME Enum), so nothing else may be written.
type ClusterStatus string

// The ClusterStatus values, unchanged from Zed to master.
const (
	StatusCreateInProgress   ClusterStatus = "CREATE_IN_PROGRESS"
	StatusCreateFailed       ClusterStatus = "CREATE_FAILED"
	StatusCreateComplete     ClusterStatus = "CREATE_COMPLETE"
	StatusUpdateInProgress   ClusterStatus = "UPDATE_IN_PROGRESS"
	StatusUpdateFailed       ClusterStatus = "UPDATE_FAILED"
	StatusUpdateComplete     ClusterStatus = "UPDATE_COMPLETE"
	StatusDeleteInProgress   ClusterStatus = "DELETE_IN_PROGRESS"
	StatusDeleteFailed       ClusterStatus = "DELETE_FAILED"
	StatusDeleteComplete     ClusterStatus = "DELETE_COMPLETE"
	StatusResumeComplete     ClusterStatus = "RESUME_COMPLETE"
	StatusResumeFailed       ClusterStatus = "RESUME_FAILED"
	StatusRestoreComplete    ClusterStatus = "RESTORE_COMPLETE"
	StatusRollbackInProgress ClusterStatus = "ROLLBACK_IN_PROGRESS"
	StatusRollbackFailed     ClusterStatus = "ROLLBACK_FAILED"
	StatusRollbackComplete   ClusterStatus = "ROLLBACK_COMPLETE"
	StatusSnapshotComplete   ClusterStatus = "SNAPSHOT_COMPLETE"
	StatusCheckComplete      ClusterStatus = "CHECK_COMPLETE"
	StatusAdoptComplete      ClusterStatus = "ADOPT_COMPLETE"
)

// AllClusterStatuses lists every valid value in Magnum's order.
var AllClusterStatuses = []ClusterStatus{
	StatusCreateInProgress, StatusCreateFailed, StatusCreateComplete,
	StatusUpdateInProgress, StatusUpdateFailed, StatusUpdateComplete,
	StatusDeleteInProgress, StatusDeleteFailed, StatusDeleteComplete,
	StatusResumeComplete, StatusResumeFailed, StatusRestoreComplete,
	StatusRollbackInProgress, StatusRollbackFailed, StatusRollbackComplete,
	StatusSnapshotComplete, StatusCheckComplete, StatusAdoptComplete,
}

// Status sets the periodic syncs poll and the API reads; the guards are in Transitions.
var (
	// FailedStatuses is STATUS_FAILED: the API shows "faults" for clusters in these.
	FailedStatuses = []ClusterStatus{
		StatusCreateFailed, StatusUpdateFailed, StatusDeleteFailed, StatusRollbackFailed, StatusResumeFailed,
	}
	// SyncStatuses are the clusters the periodic status sync polls (and a restart must resume).
	SyncStatuses = []ClusterStatus{
		StatusCreateInProgress, StatusUpdateInProgress, StatusDeleteInProgress, StatusRollbackInProgress,
	}
	// HealthSyncStatusesZed are the clusters Zed's health sync polls.
	HealthSyncStatusesZed = []ClusterStatus{
		StatusCreateComplete, StatusUpdateComplete, StatusUpdateInProgress, StatusRollbackInProgress,
	}
	// HealthSyncStatuses22 are the clusters the health sync polls from 22.0.0 on.
	HealthSyncStatuses22 = []ClusterStatus{
		StatusCreateInProgress, StatusCreateFailed, StatusCreateComplete, StatusUpdateInProgress,
		StatusUpdateComplete, StatusUpdateFailed, StatusDeleteInProgress, StatusDeleteFailed,
		StatusRollbackInProgress,
	}
)

// Valid reports whether s is one of Magnum's values.
func (s ClusterStatus) Valid() bool { return StatusIn(s, AllClusterStatuses) }

// IsComplete: ends with _COMPLETE (DELETE_COMPLETE included), as the periodic sync tests it.
func (s ClusterStatus) IsComplete() bool { return strings.HasSuffix(string(s), "_COMPLETE") }

// IsFailed: ends with _FAILED.
func (s ClusterStatus) IsFailed() bool { return strings.HasSuffix(string(s), "_FAILED") }

// IsInProgress: ends with _IN_PROGRESS.
func (s ClusterStatus) IsInProgress() bool { return strings.HasSuffix(string(s), "_IN_PROGRESS") }

// StatusIn reports whether s is in set.
func StatusIn(s ClusterStatus, set []ClusterStatus) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// HealthStatus is ClusterHealthStatus.
type HealthStatus string

const (
	HealthHealthy   HealthStatus = "HEALTHY"
	HealthUnhealthy HealthStatus = "UNHEALTHY"
	HealthUnknown   HealthStatus = "UNKNOWN"
)

// Valid reports whether h is one of Magnum's values.
func (h HealthStatus) Valid() bool {
	return h == HealthHealthy || h == HealthUnhealthy || h == HealthUnknown
}

// ClusterType is ClusterTypeField (cluster_template.coe). Zed accepts all five; master only
// kubernetes, so a template from Zed may still say "swarm".
type ClusterType string

const (
	ClusterTypeKubernetes ClusterType = "kubernetes"
	ClusterTypeSwarm      ClusterType = "swarm"
	ClusterTypeMesos      ClusterType = "mesos"
	ClusterTypeDCOS       ClusterType = "dcos"
	ClusterTypeSwarmMode  ClusterType = "swarm-mode"
)

// Valid reports whether c is one of Magnum's values.
func (c ClusterType) Valid() bool {
	switch c {
	case ClusterTypeKubernetes, ClusterTypeSwarm, ClusterTypeMesos, ClusterTypeDCOS, ClusterTypeSwarmMode:
		return true
	}
	return false
}

// ConductorBinary is the only MagnumServiceBinary value; magnum-api's `coe service list` rejects
// rows with any other binary.
const ConductorBinary = "magnum-conductor"
