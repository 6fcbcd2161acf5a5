package magnum

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ovoRoundTrip feeds primitives to Magnum 15.0.1's own MagnumObjectSerializer (Debian
// python3-magnum, the package deploy/local/magnum-schema.sh installs) and returns, for each,
// what Python serialized back or the exception it raised.
const ovoRoundTrip = `
import json, sys
from magnum.objects import base
ser = base.MagnumObjectSerializer()
out = []
for prim in json.load(sys.stdin):
    try:
        out.append({"ok": ser.serialize_entity(None, ser.deserialize_entity(None, prim))})
    except Exception as e:
        out.append({"error": type(e).__name__, "message": str(e)})
json.dump(out, sys.stdout)
`

type pyResult struct {
	OK      json.RawMessage `json:"ok"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
}

func pythonMagnum(t *testing.T, prims []*Object) []pyResult {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import magnum.objects").Run(); err != nil {
		t.Skip("Debian python3-magnum is not installed (deploy/local/magnum-schema.sh installs it): " + err.Error())
	}
	in, err := json.Marshal(prims)
	require.NoError(t, err)
	cmd := exec.Command("/usr/bin/python3", "-c", ovoRoundTrip)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var res []pyResult
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Len(t, res, len(prims))
	return res
}

// TestMagnumPythonAcceptsWhatWeEncode: objects built and encoded in Go are accepted by Magnum's
// real deserializer at the Zed versions and come back with the same fields; and the reason for
// version negotiation, shown: Zed refuses a Cluster 1.24.
func TestMagnumPythonAcceptsWhatWeEncode(t *testing.T) {
	created := time.Date(2026, 11, 30, 4, 8, 3, 0, time.UTC)
	cluster := &Cluster{
		ID: Value[int64](7), UUID: Value("5c2a2f0e-4a5e-4c55-9d67-3b4f6a9c1e01"), Name: Value("k8s-demo"),
		Status: Value(StatusCreateComplete), StatusReason: Null[string](), HealthStatus: Value(HealthHealthy),
		HealthStatusReason: Value(NewDict("cluster", "Ready")), Labels: Value(NewDict("kube_tag", "v1.27.4")),
		APIAddress: Value("https://10.0.0.5:6443"), FloatingIPEnabled: Value(true), CreatedAt: Value(created),
		TrustID: Null[string](), DockerVolumeSize: Value[int64](10),
		ClusterTemplate: Value(&ClusterTemplate{ID: Value[int64](2), UUID: Value("t-1"), COE: Value(ClusterTypeKubernetes),
			Driver: Value("k8s_capi_helm_v1"), Public: Value(false), CreatedAt: Value(created)}),
	}
	ng := &NodeGroup{ID: Value[int64](2), UUID: Value("8e136210-8261-4791-9129-1806ca659b19"), Name: Value("default-worker"),
		ClusterID: Value("5c2a2f0e-4a5e-4c55-9d67-3b4f6a9c1e01"), ProjectID: Value("p"), Role: Value("worker"),
		NodeCount: Value[int64](3), MinNodeCount: Value[int64](0), MaxNodeCount: Null[int64](), IsDefault: Value(true),
		NodeAddresses: Value([]string{"10.0.0.20"}), Status: Value(StatusUpdateInProgress),
		NodeLabels: Value(NewDict("tier", "batch"))}
	cert := &Certificate{ProjectID: Value("p"), UserID: Value("u"), ClusterUUID: Value("c"), PEM: Value("-----BEGIN CERTIFICATE-----\n")}
	kp := &X509KeyPair{ID: Value[int64](1), UUID: Value("k"), Certificate: Value("c"), PrivateKey: Value(Secret("key")),
		PrivateKeyPassphrase: Value(Secret("pp"))}
	svc := &MagnumService{ID: Value[int64](1), Host: Value("h"), Binary: Value(ConductorBinary), Disabled: Value(false),
		ForcedDown: Value(false), ReportCount: Value[int64](3), LastSeenUp: Value(created)}

	zed := NewVersions(VersionsZed)
	var prims []*Object
	for _, v := range []View{cluster, ng, cert, kp, svc} {
		obj, err := Encode(v, zed)
		require.NoError(t, err)
		prims = append(prims, obj)
	}
	newer, err := Encode(cluster, NewVersions(Versions23))
	require.NoError(t, err)
	prims = append(prims, newer)

	res := pythonMagnum(t, prims)
	for i, want := range prims[:5] {
		require.Empty(t, res[i].Error, "%s: Python refused it: %s", want.Name, res[i].Message)
		got, err := DecodeObject(res[i].OK)
		require.NoError(t, err)
		assertSameData(t, "python "+want.Name, want, got, false)
	}
	assert.Equal(t, "IncompatibleObjectVersion", res[5].Error, res[5].Message)
}
