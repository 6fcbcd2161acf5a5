package magnum

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Cluster as loaded from the DB by magnum-api (no changes), with one field null and several
// absent.
const loadedCluster = `{"magnum_object.name": "Cluster", "magnum_object.namespace": "magnum",
 "magnum_object.version": "1.23", "magnum_object.data": {"id": 7, "uuid": "5c2a2f0e-4a5e-4c55-9d67-3b4f6a9c1e01",
 "name": "k8s-demo", "status": "CREATE_COMPLETE", "discovery_url": null, "labels": {"kube_tag": "v1.27.4"},
 "trustee_password": "s3cr3t-pass", "created_at": "2026-11-30T04:08:03Z", "floating_ip_enabled": true}}`

func TestAbsentIsNotNull(t *testing.T) {
	obj, err := DecodeObject([]byte(loadedCluster))
	require.NoError(t, err)
	assert.True(t, obj.Has("discovery_url"))
	assert.True(t, obj.IsNull("discovery_url"))
	assert.False(t, obj.Has("api_address"))
	assert.False(t, obj.IsNull("api_address"))

	c, err := DecodeCluster(obj)
	require.NoError(t, err)
	assert.True(t, c.DiscoveryURL.IsSet())
	assert.True(t, c.DiscoveryURL.IsNull())
	_, ok := c.DiscoveryURL.Get()
	assert.False(t, ok)
	assert.False(t, c.APIAddress.IsSet())
	assert.Equal(t, "fallback", c.APIAddress.Or("fallback"))

	back, err := EncodeAt(c, obj.Version, nil)
	require.NoError(t, err)
	raw, ok := back.Raw("discovery_url")
	require.True(t, ok, "a null field must stay in data")
	assert.Equal(t, "null", string(raw))
	assert.False(t, back.Has("api_address"), "an absent field must stay out of data")
	enc, err := back.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(enc), `"discovery_url":null`)
	assert.NotContains(t, string(enc), "api_address")
	assert.NotContains(t, string(enc), KeyChanges, "no changes: Python leaves the key out")
}

func TestChangesTracking(t *testing.T) {
	t.Run("setting a field of a loaded object adds exactly it", func(t *testing.T) {
		c, err := DecodeCluster(mustDecode(t, loadedCluster))
		require.NoError(t, err)
		assert.Empty(t, Changed(c))
		c.Status.Set(StatusUpdateInProgress)
		c.StatusReason.SetNull()
		assert.Equal(t, []string{"status", "status_reason"}, Changed(c))
		obj, err := EncodeAt(c, MustVersion("1.23"), nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"status", "status_reason"}, obj.Changes())
		ResetChanges(c)
		assert.Empty(t, Changed(c))
	})
	t.Run("received changes are kept in order", func(t *testing.T) {
		obj := mustDecode(t, `{"magnum_object.name":"NodeGroup","magnum_object.namespace":"magnum","magnum_object.version":"1.1",
			"magnum_object.data":{"id":3,"max_node_count":5,"min_node_count":1,"name":"ng"},"magnum_object.changes":["min_node_count","max_node_count"]}`)
		ng, err := DecodeNodeGroup(obj)
		require.NoError(t, err)
		assert.True(t, ng.MaxNodeCount.Changed())
		assert.False(t, ng.ID.Changed())
		ng.Status.Set(StatusUpdateInProgress)
		back, err := EncodeAt(ng, obj.Version, nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"min_node_count", "max_node_count", "status"}, back.Changes())
	})
	t.Run("a new object lists every set field, like an unsaved Python object", func(t *testing.T) {
		cert := &Certificate{ProjectID: Value("p-1"), UserID: Value("u-1"), ClusterUUID: Value("c-1"), PEM: Value("-----BEGIN")}
		obj, err := Encode(cert, nil)
		require.NoError(t, err)
		assert.Equal(t, "1.2", obj.Version.String())
		assert.Equal(t, []string{"project_id", "user_id", "cluster_uuid", "pem"}, obj.Changes())
		enc, _ := obj.Encode()
		assert.Equal(t, `{"magnum_object.name":"Certificate","magnum_object.namespace":"magnum","magnum_object.version":"1.2",`+
			`"magnum_object.data":{"project_id":"p-1","user_id":"u-1","cluster_uuid":"c-1","pem":"-----BEGIN"},`+
			`"magnum_object.changes":["project_id","user_id","cluster_uuid","pem"]}`, string(enc))
	})
	t.Run("generic object: Set adds, Unset removes, SetRaw validates", func(t *testing.T) {
		obj := mustDecode(t, loadedCluster)
		require.NoError(t, obj.Set("api_address", "https://10.0.0.5:6443"))
		obj.SetNull("stack_id")
		require.NoError(t, obj.Set("status", "CREATE_COMPLETE")) // same value still counts, as in Python
		assert.Equal(t, []string{"api_address", "stack_id", "status"}, obj.Changes())
		obj.Unset("stack_id")
		assert.Equal(t, []string{"api_address", "status"}, obj.Changes())
		assert.False(t, obj.Has("stack_id"))
		assert.Error(t, obj.SetRaw("labels", json.RawMessage(`{"a":`)))
		var addr string
		ok, err := obj.Get("api_address", &addr)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "https://10.0.0.5:6443", addr)
		obj.ResetChanges()
		enc, _ := obj.Encode()
		assert.NotContains(t, string(enc), KeyChanges)
	})
	t.Run("an empty changes list that was received is re-emitted", func(t *testing.T) {
		in := `{"magnum_object.name":"Certificate","magnum_object.namespace":"magnum","magnum_object.version":"1.2","magnum_object.data":{},"magnum_object.changes":[]}`
		obj := mustDecode(t, in)
		enc, err := obj.Encode()
		require.NoError(t, err)
		assert.Equal(t, in, string(enc))
	})
}

func TestVersionNegotiation(t *testing.T) {
	cluster := func() *Cluster {
		return &Cluster{ID: Value[int64](1), UUID: Value("u"), TrustID: Value("t"), TrusteePassword: Value(Secret("pw")),
			ClusterTemplate: Value(&ClusterTemplate{ID: Value[int64](2), Driver: Value("k8s_capi_helm_v1"), COE: Value(ClusterTypeKubernetes)})}
	}
	t.Run("learned only: Zed until the API shows otherwise", func(t *testing.T) {
		vs := NewVersions(nil)
		v, err := vs.For("Cluster")
		require.NoError(t, err)
		assert.Equal(t, "1.23", v.String())
		vs.Observe(mustDecode(t, `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.24",
			"magnum_object.data":{"cluster_template":{"magnum_object.name":"ClusterTemplate","magnum_object.namespace":"magnum","magnum_object.version":"1.21","magnum_object.data":{}}}}`))
		v, _ = vs.For("Cluster")
		assert.Equal(t, "1.24", v.String())
		v, _ = vs.For("ClusterTemplate")
		assert.Equal(t, "1.21", v.String(), "nested objects are observed too")
		// An older replica of the API (rolling upgrade): from now on emit what both read.
		vs.Observe(mustDecode(t, `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.23","magnum_object.data":{}}`))
		v, _ = vs.For("Cluster")
		assert.Equal(t, "1.23", v.String())
	})
	t.Run("never above what this service knows", func(t *testing.T) {
		vs := NewVersions(nil)
		vs.Observe(mustDecode(t, `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.31","magnum_object.data":{"id":1,"brand_new":"x"}}`))
		v, err := vs.For("Cluster")
		require.NoError(t, err)
		assert.Equal(t, "1.24", v.String())
	})
	t.Run("configured preset caps what is learned", func(t *testing.T) {
		vs := NewVersions(Versions2024)
		vs.Observe(mustDecode(t, `{"magnum_object.name":"NodeGroup","magnum_object.namespace":"magnum","magnum_object.version":"1.2","magnum_object.data":{}}`))
		v, _ := vs.For("NodeGroup")
		assert.Equal(t, "1.1", v.String())
	})
	t.Run("Zed encoding keeps trusts, drops driver", func(t *testing.T) {
		obj, err := Encode(cluster(), NewVersions(VersionsZed))
		require.NoError(t, err)
		assert.Equal(t, "1.23", obj.Version.String())
		assert.True(t, obj.Has("trust_id"))
		assert.True(t, obj.Has("trustee_password"))
		raw, _ := obj.Raw("cluster_template")
		nested, err := DecodeObject(raw)
		require.NoError(t, err)
		assert.Equal(t, "1.20", nested.Version.String())
		assert.False(t, nested.Has("driver"), "ClusterTemplate 1.20 has no driver field")
	})
	t.Run("23.0.0 encoding drops trusts, keeps driver and node labels", func(t *testing.T) {
		vs := NewVersions(Versions23)
		obj, err := Encode(cluster(), vs)
		require.NoError(t, err)
		assert.Equal(t, "1.24", obj.Version.String())
		for _, f := range []string{"trust_id", "trustee_username", "trustee_password", "trustee_user_id"} {
			assert.False(t, obj.Has(f), f)
		}
		raw, _ := obj.Raw("cluster_template")
		nested, _ := DecodeObject(raw)
		assert.Equal(t, "1.21", nested.Version.String())
		assert.True(t, nested.Has("driver"))

		ng := &NodeGroup{ID: Value[int64](1), NodeLabels: Value(NewDict("tier", "batch")),
			NodeTaints: Value([]Dict{NewDict("key", "dedicated", "value", "batch", "effect", "NoSchedule")})}
		o12, err := Encode(ng, vs)
		require.NoError(t, err)
		assert.True(t, o12.Has("node_labels") && o12.Has("node_taints"))
		o11, err := Encode(ng, NewVersions(VersionsZed))
		require.NoError(t, err)
		assert.False(t, o11.Has("node_labels") || o11.Has("node_taints"), "NodeGroup 1.1 has no node labels")
		assert.NotContains(t, o11.Changes(), "node_labels")
	})
	t.Run("Derive answers the caller with its own versions", func(t *testing.T) {
		base := NewVersions(VersionsZed)
		req := mustDecode(t, `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.24","magnum_object.data":{}}`)
		d := base.Derive(req)
		v, _ := d.For("Cluster")
		assert.Equal(t, "1.24", v.String())
		v, _ = base.For("Cluster")
		assert.Equal(t, "1.23", v.String(), "the shared table is not changed")
	})
	t.Run("impossible versions are errors", func(t *testing.T) {
		vs := NewVersions(map[string]Version{"Cluster": {2, 0}, "NodeGroup": {1, 0}})
		_, err := Encode(cluster(), vs)
		assert.ErrorIs(t, err, ErrIncompatibleVersion)
		_, err = Encode(&NodeGroup{}, vs)
		assert.ErrorIs(t, err, ErrIncompatibleVersion)
		assert.Contains(t, err.Error(), "oldest NodeGroup version this service writes is 1.1")
		_, err = vs.For("Bay")
		assert.ErrorIs(t, err, ErrUnknownClass)
	})
	t.Run("release presets", func(t *testing.T) {
		for rel, want := range map[string]string{"zed": "1.23", "2025.1": "1.23", "23": "1.24"} {
			p, err := ReleaseVersions(rel)
			require.NoError(t, err, rel)
			assert.Equal(t, want, p["Cluster"].String(), rel)
		}
		_, err := ReleaseVersions("antelope-ish")
		assert.Error(t, err)
	})
}

func TestDecodeErrors(t *testing.T) {
	prim := func(name, ns, ver, data string) string {
		return fmt.Sprintf(`{"magnum_object.name":%q,"magnum_object.namespace":%q,"magnum_object.version":%q,"magnum_object.data":%s}`, name, ns, ver, data)
	}
	cases := []struct {
		name, in string
		kind     error
		mention  string
	}{
		{"unknown class", prim("Bay", "magnum", "1.1", "{}"), ErrUnknownClass, "Bay"},
		{"other namespace", prim("Cluster", "nova", "1.23", "{}"), ErrWrongNamespace, `"nova"`},
		{"newer major", prim("Cluster", "magnum", "2.0", "{}"), ErrIncompatibleVersion, "Cluster 2.0"},
		{"older major", prim("Cluster", "magnum", "0.9", "{}"), ErrIncompatibleVersion, "Cluster 0.9"},
		{"not an object", `["magnum_object.name"]`, ErrMalformedObject, "JSON object"},
		{"missing data", `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.23"}`, ErrMalformedObject, KeyData},
		{"version not a string", `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":1.23,"magnum_object.data":{}}`, ErrMalformedObject, KeyVersion},
		{"version garbage", prim("Cluster", "magnum", "one.two", "{}"), ErrMalformedObject, "one.two"},
		{"data not a dict", prim("Cluster", "magnum", "1.23", "[]"), ErrMalformedObject, KeyData},
		{"changes not strings", `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.23","magnum_object.data":{},"magnum_object.changes":[1]}`, ErrMalformedObject, KeyChanges},
		{"duplicate field", prim("Cluster", "magnum", "1.23", `{"id":1,"id":2}`), ErrMalformedObject, "duplicate"},
		{"trailing data", prim("Cluster", "magnum", "1.23", "{}") + "{}", ErrMalformedObject, "trailing"},
		{"truncated", `{"magnum_object.name":"Clu`, ErrMalformedObject, ""},
		{"empty", ``, ErrMalformedObject, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeObject([]byte(c.in))
			require.Error(t, err)
			assert.ErrorIs(t, err, c.kind)
			var oe *ObjectError
			assert.True(t, errors.As(err, &oe))
			assert.Contains(t, err.Error(), c.mention)
		})
	}

	viewCases := []struct {
		name, in string
		kind     error
		mention  string
	}{
		{"wrong class for the view", prim("NodeGroup", "magnum", "1.1", "{}"), ErrWrongClass, "expected Cluster"},
		{"invalid status", prim("Cluster", "magnum", "1.23", `{"status":"ALMOST_DONE"}`), ErrInvalidField, "status"},
		{"invalid health", prim("Cluster", "magnum", "1.23", `{"health_status":"OK"}`), ErrInvalidField, "health_status"},
		{"null in a non-nullable field", prim("Cluster", "magnum", "1.23", `{"id":null}`), ErrInvalidField, "not nullable"},
		{"string for an integer", prim("Cluster", "magnum", "1.23", `{"id":"7"}`), ErrInvalidField, "id"},
		{"number in a dict of strings", prim("Cluster", "magnum", "1.23", `{"labels":{"a":1}}`), ErrInvalidField, "labels"},
		{"bad date", prim("Cluster", "magnum", "1.23", `{"created_at":"yesterday"}`), ErrInvalidField, "created_at"},
		{"nested of another class", prim("Cluster", "magnum", "1.23", `{"cluster_template":`+prim("NodeGroup", "magnum", "1.1", "{}")+`}`), ErrWrongClass, "expected ClusterTemplate"},
		{"nested not an object", prim("Cluster", "magnum", "1.23", `{"cluster_template":{"id":1}}`), ErrMalformedObject, "cluster_template"},
	}
	for _, c := range viewCases {
		t.Run(c.name, func(t *testing.T) {
			obj, err := DecodeObject([]byte(c.in))
			require.NoError(t, err)
			_, err = DecodeCluster(obj)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.kind)
			assert.Contains(t, err.Error(), c.mention)
		})
	}

	t.Run("a view refuses to encode an invalid enum or a null id", func(t *testing.T) {
		_, err := Encode(&Cluster{Status: Value(ClusterStatus("DONE"))}, nil)
		assert.ErrorIs(t, err, ErrInvalidField)
		_, err = Encode(&Cluster{ID: Null[int64]()}, nil)
		assert.ErrorIs(t, err, ErrInvalidField)
	})
	t.Run("newer minor of a known class is accepted, unknown fields kept", func(t *testing.T) {
		in := prim("Cluster", "magnum", "1.30", `{"id":1,"shiny":{"a":"b"}}`)
		obj, err := DecodeObject([]byte(in))
		require.NoError(t, err)
		c, err := DecodeCluster(obj)
		require.NoError(t, err)
		back, err := EncodeAt(c, MustVersion("1.24"), nil)
		require.NoError(t, err)
		assert.False(t, back.Has("shiny"), "unknown fields belong to the version they came with")
	})
}

func TestUnknownFieldsSurviveAtTheSameVersion(t *testing.T) {
	in := `{"magnum_object.name":"NodeGroup","magnum_object.namespace":"magnum","magnum_object.version":"1.2",` +
		`"magnum_object.data":{"id":1,"future_field":[1,2],"name":"ng"},"magnum_object.changes":["future_field"]}`
	obj := mustDecode(t, in)
	ng, err := DecodeNodeGroup(obj)
	require.NoError(t, err)
	back, err := EncodeAt(ng, obj.Version, nil)
	require.NoError(t, err)
	enc, _ := back.Encode()
	assert.Equal(t, in, string(enc))
}

func TestDateTime(t *testing.T) {
	want := time.Date(2026, 11, 30, 4, 8, 3, 0, time.UTC)
	for _, in := range []string{
		"2026-11-30T04:08:03Z", "2026-11-30T04:08:03", "2026-11-30 04:08:03", "2026-11-30T04:08:03.000000",
		"2026-11-30T04:08:03+00:00", "2026-11-30T05:08:03+01:00", "2026-11-30T05:08:03+0100", "2026-11-29T23:08:03-05:00",
	} {
		got, err := ParseDateTime(in)
		require.NoError(t, err, in)
		assert.True(t, want.Equal(got), "%s → %v", in, got)
		assert.Equal(t, "2026-11-30T04:08:03Z", FormatDateTime(got))
	}
	frac, err := ParseDateTime("2026-11-30T04:08:03.504542+0000")
	require.NoError(t, err)
	assert.Equal(t, "2026-11-30T04:08:03Z", FormatDateTime(frac), "no fractional seconds on output")
	_, err = ParseDateTime("30/11/2026")
	assert.Error(t, err)

	c := &Cluster{CreatedAt: Value(time.Date(2026, 1, 2, 3, 4, 5, 999, time.FixedZone("x", 3600)))}
	obj, err := Encode(c, nil)
	require.NoError(t, err)
	raw, _ := obj.Raw("created_at")
	assert.Equal(t, `"2026-01-02T02:04:05Z"`, string(raw))
}

func TestSecretsDoNotPrint(t *testing.T) {
	obj := mustDecode(t, loadedCluster)
	for _, s := range []string{obj.String(), fmt.Sprintf("%v", obj), fmt.Sprintf("%#v", obj)} {
		assert.NotContains(t, s, "s3cr3t-pass")
		assert.Contains(t, s, "<redacted>")
	}
	c, err := DecodeCluster(obj)
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), c.TrusteePassword.String()} {
		assert.NotContains(t, s, "s3cr3t-pass")
	}
	pw, ok := c.TrusteePassword.Get()
	require.True(t, ok)
	assert.Equal(t, "s3cr3t-pass", pw.Reveal())
}

func TestStatusSets(t *testing.T) {
	for _, s := range AllClusterStatuses {
		assert.True(t, s.Valid(), s)
		assert.LessOrEqual(t, len(s), 20, "%s must fit varchar(20)", s)
	}
	assert.False(t, ClusterStatus("CREATE_DONE").Valid())
	assert.Len(t, CompleteStatuses, 8)
	assert.False(t, StatusIn(StatusDeleteComplete, CompleteStatuses), "DELETE_COMPLETE is not in the *_COMPLETE guard set")
	assert.True(t, StatusDeleteComplete.IsComplete())
	assert.True(t, StatusIn(StatusUpdateFailed, ResizeAllowedStatuses))
	assert.False(t, StatusIn(StatusUpdateFailed, CompleteStatuses))
	assert.True(t, StatusRollbackInProgress.IsInProgress())
	assert.True(t, StatusResumeFailed.IsFailed())
	for _, s := range SyncStatuses {
		assert.True(t, s.IsInProgress())
	}
	assert.True(t, HealthUnknown.Valid())
	assert.False(t, HealthStatus("healthy").Valid())
}

func mustDecode(t *testing.T, s string) *Object {
	t.Helper()
	obj, err := DecodeObject([]byte(strings.TrimSpace(s)))
	require.NoError(t, err)
	return obj
}

func TestDictOrderAndReceivedJSON(t *testing.T) {
	obj := mustDecode(t, `{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.23",
		"magnum_object.data":{"labels":{"kube_tag":"v1.24.16-rancher1","container_runtime":"containerd"},"name":"a"}}`)
	c, err := DecodeCluster(obj)
	require.NoError(t, err)
	labels, _ := c.Labels.Get()
	assert.Equal(t, []string{"kube_tag", "container_runtime"}, labels.Keys(), "the user's order, as Python keeps it")
	raw, ok := ReceivedJSON(c, "labels")
	require.True(t, ok)
	assert.JSONEq(t, `{"kube_tag":"v1.24.16-rancher1","container_runtime":"containerd"}`, string(raw))

	labels.Set("auto_healing_enabled", "true")
	c.Labels.Set(labels)
	_, ok = ReceivedJSON(c, "labels")
	assert.False(t, ok, "no longer the received value")
	back, err := EncodeAt(c, obj.Version, nil)
	require.NoError(t, err)
	enc, _ := back.Raw("labels")
	assert.Equal(t, `{"kube_tag":"v1.24.16-rancher1","container_runtime":"containerd","auto_healing_enabled":"true"}`, string(enc))
	assert.Equal(t, []string{"labels"}, back.Changes())

	var d Dict
	assert.Error(t, json.Unmarshal([]byte(`{"a":1}`), &d), "DictOfStrings holds strings only")
	assert.True(t, DictFromMap(map[string]string{"b": "1", "a": "2"}).Equal(NewDict("a", "2", "b", "1")))
	assert.Equal(t, []string{"a", "b"}, DictFromMap(map[string]string{"b": "1", "a": "2"}).Keys())
	d = NewDict("x", "1", "y", "2")
	d.Delete("x")
	assert.Equal(t, `{"y":"2"}`, d.String())
}
