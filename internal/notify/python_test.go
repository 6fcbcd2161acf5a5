package notify

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// magnumPayload builds the payload with Magnum's own notify code path (magnum.conductor.utils
// and pycadf) for the cluster of testCluster, printing it as JSON.
const magnumPayload = `
import datetime, json
from oslo_serialization import jsonutils
from pycadf import cadftaxonomy as taxonomy, cadftype, eventfactory, resource
from magnum.conductor import utils

class Cluster: pass
c = Cluster()
c.uuid = "5d12f6fd-a196-4bf0-ae4c-1f639a523a52"; c.name = "demo"; c.project_id = "p1"; c.status = "CREATE_COMPLETE"
c.status_reason = None; c.cluster_template_id = None; c.keypair = None; c.docker_volume_size = None
c.labels = {"kube_tag": "v1.36.3"}; c.master_flavor_id = None; c.flavor_id = None; c.stack_id = None
c.health_status = None; c.create_timeout = 60; c.api_address = None; c.discovery_url = None
c.node_addresses = ["10.0.0.2", "10.0.0.3"]; c.master_addresses = ["10.0.0.1"]; c.node_count = 2; c.master_count = 3
c.created_at = datetime.datetime(2026, 12, 1, 10, 0, 0, tzinfo=datetime.timezone.utc); c.updated_at = None

class Context: user_id = "u1"; project_id = "p1"; domain_id = None
event = eventfactory.EventFactory().new_event(
    eventType=cadftype.EVENTTYPE_ACTIVITY, outcome=taxonomy.OUTCOME_SUCCESS, action=taxonomy.ACTION_CREATE,
    initiator=utils._get_request_audit_info(Context()), target=utils._get_event_target(cluster_obj=c),
    observer=resource.Resource(typeURI="service/magnum/cluster"))
print(json.dumps(jsonutils.to_primitive(event.as_dict(), convert_instances=True)))
`

// TestPayloadEqualsMagnums compares Payload with what Magnum 15.0.1's conductor builds for the
// same cluster (generated identifiers and the event time aside), key order included.
func TestPayloadEqualsMagnums(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import magnum.conductor.utils, pycadf").Run(); err != nil {
		t.Skip("Debian python3-magnum is not installed (deploy/local/magnum-schema.sh installs it): " + err.Error())
	}
	out, err := exec.Command("/usr/bin/python3", "-c", magnumPayload).Output()
	require.NoError(t, err)
	var want map[string]any
	require.NoError(t, json.Unmarshal(out, &want))

	c, groups := testCluster()
	ours := Payload(&rpc.Context{UserID: "u1", ProjectID: "p1"}, ActionCreate, OutcomeSuccess, c, groups, time.Now(), nil)
	var got map[string]any
	require.NoError(t, json.Unmarshal(ours, &got))
	for _, m := range []map[string]any{want, got} {
		delete(m, "id")
		delete(m, "eventTime")
		delete(m["initiator"].(map[string]any), "id")
		delete(m["observer"].(map[string]any), "id")
	}
	assert.Equal(t, want, got)
	assert.Equal(t, keyOrder(t, out), keyOrder(t, ours), "top-level key order")
}

func keyOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	_, err := dec.Token() // {
	require.NoError(t, err)
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}
