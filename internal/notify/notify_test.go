package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

func testCluster() (*magnum.Cluster, []*magnum.NodeGroup) {
	c := &magnum.Cluster{}
	c.UUID.Set("5d12f6fd-a196-4bf0-ae4c-1f639a523a52")
	c.Name.Set("demo")
	c.ProjectID.Set("p1")
	c.Status.Set("CREATE_COMPLETE")
	c.Labels.Set(magnum.NewDict("kube_tag", "v1.36.3"))
	c.CreateTimeout.Set(60)
	c.CreatedAt.Set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	master, worker := &magnum.NodeGroup{}, &magnum.NodeGroup{}
	master.Role.Set("master")
	master.NodeCount.Set(3)
	master.NodeAddresses.Set([]string{"10.0.0.1"})
	worker.Role.Set("worker")
	worker.NodeCount.Set(2)
	worker.NodeAddresses.Set([]string{"10.0.0.2", "10.0.0.3"})
	return c, []*magnum.NodeGroup{master, worker}
}

func TestPayloadIsMagnumsCADFEvent(t *testing.T) {
	c, groups := testCluster()
	n := 0
	ids := func() string { n++; return fmt.Sprintf("id-%d", n) }
	now := time.Date(2026, 12, 1, 10, 5, 0, 123456000, time.UTC)
	rctx := &rpc.Context{UserID: "u1", ProjectID: "p1", AuthToken: "secret"}
	var ev map[string]any
	require.NoError(t, json.Unmarshal(Payload(rctx, ActionCreate, OutcomeSuccess, c, groups, now, ids), &ev))
	assert.Equal(t, "http://schemas.dmtf.org/cloud/audit/1.0/event", ev["typeURI"])
	assert.Equal(t, "activity", ev["eventType"])
	assert.Equal(t, "2026-12-01T10:05:00.123456+0000", ev["eventTime"], "pycadf's format")
	assert.Equal(t, "create", ev["action"])
	assert.Equal(t, "success", ev["outcome"])
	assert.Equal(t, map[string]any{"id": "id-1", "typeURI": "service/security/account/user", "user_id": "u1", "project_id": "p1"}, ev["initiator"])
	assert.Equal(t, map[string]any{"id": "id-4", "typeURI": "service/magnum/cluster"}, ev["observer"])
	target := ev["target"].(map[string]any)
	assert.Equal(t, c.UUID.Or(""), target["id"])
	assert.Equal(t, "demo", target["name"])
	att := target["attachments"].([]any)[0].(map[string]any)
	assert.Equal(t, "cluster_data", att["name"])
	content := att["content"].(map[string]any)
	assert.Equal(t, "CREATE_COMPLETE", content["status"])
	assert.Equal(t, "2026-12-01T10:00:00.000000", content["created_at"])
	assert.Nil(t, content["updated_at"])
	assert.Contains(t, content, "docker_volume_size:", "Magnum's own key, colon included")
	assert.Equal(t, 2.0, content["node_count"])
	assert.Equal(t, 3.0, content["master_count"])
	assert.Equal(t, []any{"10.0.0.2", "10.0.0.3"}, content["node_addresses"])
	assert.Equal(t, []any{"10.0.0.1"}, content["master_addresses"])
	assert.Equal(t, map[string]any{"kube_tag": "v1.36.3"}, content["labels"])
	assert.NotContains(t, string(Payload(rctx, ActionCreate, OutcomeSuccess, c, groups, now, ids)), "secret")

	// The status sync notifies as Magnum's admin context: no user or project.
	require.NoError(t, json.Unmarshal(Payload(nil, ActionDelete, OutcomeFailure, nil, nil, now, ids), &ev))
	assert.Equal(t, map[string]any{"id": "id-9", "typeURI": "service/security/account/user"}, ev["initiator"])
	assert.Equal(t, "service/magnum/cluster", ev["target"].(map[string]any)["typeURI"])
}

func TestActionAndPriority(t *testing.T) {
	for status, action := range map[string]string{"CREATE_IN_PROGRESS": "create", "UPDATE_FAILED": "update", "ROLLBACK_COMPLETE": "update",
		"DELETE_COMPLETE": "delete", "": ""} {
		assert.Equal(t, action, ActionOf(status), status)
	}
	assert.Equal(t, "ERROR", Priority(OutcomeFailure))
	assert.Equal(t, "INFO", Priority(OutcomePending))
	assert.Equal(t, "magnum.cluster.update", EventType(ActionUpdate))
}

type recordingSender struct {
	got []*rpc.Notification
	err error
}

func (r *recordingSender) Notify(_ context.Context, n *rpc.Notification) error {
	r.got = append(r.got, n)
	return r.err
}

func TestNotifierNeverFailsTheOperation(t *testing.T) {
	var nilNotifier *Notifier
	nilNotifier.ClusterOperation(context.Background(), nil, ActionCreate, OutcomePending, nil, nil) // notifications off

	s := &recordingSender{err: errors.New("broker down")}
	var results []error
	n := New(s, "container-infra.host-1", nil, func(_ string, err error) { results = append(results, err) })
	c, groups := testCluster()
	n.ClusterOperation(context.Background(), nil, ActionCreate, OutcomeFailure, c, groups)
	require.Len(t, s.got, 1)
	assert.Equal(t, "ERROR", s.got[0].Priority)
	assert.Equal(t, "magnum.cluster.create", s.got[0].EventType)
	assert.Equal(t, "container-infra.host-1", s.got[0].PublisherID)
	assert.True(t, s.got[0].Context.IsAdmin, "the status sync's admin context")
	require.Len(t, results, 1)
	assert.Error(t, results[0])
}

func TestEncodedNotificationRedactsTheContext(t *testing.T) {
	c, groups := testCluster()
	rctx := &rpc.Context{UserID: "u1", ProjectID: "p1", AuthToken: "tok-secret", RequestID: "req-1", AuthTokenInfo: json.RawMessage(`{"token": {}}`)}
	body, err := rpc.EncodeNotification(&rpc.Notification{PublisherID: "container-infra.h", EventType: "magnum.cluster.create", Priority: "INFO",
		Payload: Payload(rctx, ActionCreate, OutcomePending, c, groups, time.Now(), nil), Context: rctx})
	require.NoError(t, err)
	var env struct {
		Version string `json:"oslo.version"`
		Message string `json:"oslo.message"`
	}
	require.NoError(t, json.Unmarshal(body, &env))
	assert.Equal(t, "2.0", env.Version)
	var msg map[string]any
	require.NoError(t, json.Unmarshal([]byte(env.Message), &msg))
	for _, k := range []string{"message_id", "publisher_id", "event_type", "priority", "payload", "timestamp", "_unique_id"} {
		assert.Contains(t, msg, k)
	}
	assert.Equal(t, "req-1", msg["_context_request_id"])
	assert.Nil(t, msg["_context_auth_token"])
	assert.NotContains(t, string(body), "tok-secret")
	assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?$`, msg["timestamp"], "str(datetime.utcnow())")
}
