package magnum

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTransitions(t *testing.T) {
	completes := []ClusterStatus{StatusCreateComplete, StatusUpdateComplete, StatusResumeComplete, StatusRestoreComplete,
		StatusRollbackComplete, StatusSnapshotComplete, StatusCheckComplete, StatusAdoptComplete}
	whileUpdating := append(append([]ClusterStatus{}, completes...), StatusUpdateInProgress, StatusUpdateFailed)
	for _, tc := range []struct {
		op                            Operation
		from                          []ClusterStatus // nil: every status
		inProgress, complete, failure ClusterStatus
		group                         ClusterStatus
	}{
		{OpClusterCreate, nil, StatusCreateInProgress, StatusCreateComplete, StatusCreateFailed, StatusCreateInProgress},
		{OpClusterUpdate, completes, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, StatusUpdateInProgress},
		{OpClusterUpgrade, completes, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, StatusUpdateInProgress},
		{OpClusterResize, whileUpdating, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, StatusUpdateInProgress},
		{OpNodeGroupCreate, whileUpdating, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, StatusCreateInProgress},
		{OpNodeGroupUpdate, whileUpdating, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, StatusUpdateInProgress},
		{OpCredentialRotate, whileUpdating, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, ""},
		{OpClusterDelete, nil, StatusDeleteInProgress, StatusDeleteComplete, StatusDeleteFailed, StatusDeleteInProgress},
		{OpNodeGroupDelete, nil, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, StatusDeleteInProgress},
		{OpRenderingMove, completes, StatusUpdateInProgress, StatusUpdateComplete, StatusUpdateFailed, ""},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			row, ok := Transitions[tc.op]
			assert.True(t, ok)
			for _, s := range AllClusterStatuses {
				assert.Equal(t, tc.from == nil || StatusIn(s, tc.from), tc.op.Allowed(s), s)
			}
			assert.Equal(t, tc.inProgress, row.InProgress)
			assert.Equal(t, tc.complete, row.Complete)
			assert.Equal(t, tc.failure, row.Failed)
			assert.Equal(t, tc.group, row.NodeGroup)
			assert.Equal(t, tc.complete, CompleteOf(tc.inProgress))
			assert.Equal(t, tc.failure, FailedOf(tc.inProgress))
			for _, s := range []ClusterStatus{row.InProgress, row.Complete, row.Failed} {
				assert.True(t, s.Valid(), s)
				assert.True(t, row.Writes(s), s)
			}
		})
	}
	assert.Len(t, Transitions, 10)
}

func TestOutcomes(t *testing.T) {
	// Operations sharing an in-progress status must agree on how it ends: the status translation
	// only sees the status.
	for op, row := range Transitions {
		got, ok := Outcome(row.InProgress)
		assert.True(t, ok, op)
		assert.Equal(t, row.Complete, got.Complete, op)
		assert.Equal(t, row.Failed, got.Failed, op)
		assert.True(t, row.InProgress.IsInProgress(), op)
		assert.True(t, row.Complete.IsComplete(), op)
		assert.True(t, row.Failed.IsFailed(), op)
	}
	for _, s := range []ClusterStatus{StatusRollbackInProgress, StatusCreateComplete, StatusUpdateFailed, ""} {
		_, ok := Outcome(s)
		assert.False(t, ok, s)
		assert.Equal(t, s, CompleteOf(s), "a status not in progress is left as it is")
		assert.Equal(t, s, FailedOf(s))
	}
	for _, s := range []ClusterStatus{StatusDeleteInProgress, StatusDeleteComplete, StatusDeleteFailed} {
		assert.True(t, Deleting(s), s)
	}
	assert.False(t, Deleting(StatusCreateComplete))
	assert.False(t, Deleting(""))
}
