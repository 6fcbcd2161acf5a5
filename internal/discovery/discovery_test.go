package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// ValidateAgainstSchema checks a document with docs/managed-kubernetes.schema.json.
func validateAgainstSchema(t *testing.T, body []byte) {
	t.Helper()
	require.NoError(t, ValidateDocument(body, "../../docs/managed-kubernetes.schema.json"))
}

type fixedSource struct {
	mu    sync.Mutex
	facts Facts
	err   error
	calls int
}

func (s *fixedSource) Facts(context.Context) (Facts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.facts, s.err
}

func seedFacts() Facts {
	return Facts{
		MagnumEndpoints: []Endpoint{{Region: "RegionOne", URL: "http://127.0.0.1:9511/v1"}},
		Regions:         []Region{{ID: "RegionOne"}, {ID: "RegionTwo"}},
		Flavors: []NodeType{{Name: "m1.medium", ID: "3", VCPUs: 2, RAMMiB: 4096, DiskGiB: 40},
			{Name: "m1.small", ID: "2", VCPUs: 1, RAMMiB: 2048, DiskGiB: 20}},
		Images: []Image{{ID: "i1", Name: "ubuntu-2404-kube-v1.35.4", OSDistro: "ubuntu", KubeVersion: "v1.35.4"},
			{ID: "i2", Name: "ubuntu-2404-kube-v1.36.3", OSDistro: "ubuntu"},
			{ID: "i3", Name: "cirros", OSDistro: "cirros"},
			{ID: "i4", Name: "plain-ubuntu", OSDistro: "ubuntu"}},
		Templates: []Template{{Name: "k8s-v1.36", ImageID: "i2", COE: "kubernetes"},
			{Name: "pinned", ImageID: "i4", COE: "kubernetes", Labels: map[string]string{"kube_tag": "v1.34.1"}},
			{Name: "swarm", ImageID: "i2", COE: "swarm"}},
	}
}

func TestBuild(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := Settings{Flavor: templates.FlavorInMemory, NamespacePrefix: "magnum-", DefaultKubernetesVersion: "v1.36.3",
		TenantView: true, Server: "https://127.0.0.1:16443", CertificateAuthorityData: "Y2E="}
	d := Build(seedFacts(), s, now)
	require.Equal(t, []NodeType{{Name: "m1.medium", ID: "3", VCPUs: 2, RAMMiB: 4096, DiskGiB: 40},
		{Name: "m1.small", ID: "2", VCPUs: 1, RAMMiB: 2048, DiskGiB: 20}}, d.NodeTypes)
	require.Equal(t, []KubernetesVersion{
		{Version: "v1.36.3", Images: []string{"ubuntu-2404-kube-v1.36.3"}, Templates: []string{"k8s-v1.36"}},
		{Version: "v1.35.4", Images: []string{"ubuntu-2404-kube-v1.35.4"}},
		{Version: "v1.34.1", Templates: []string{"pinned"}},
	}, d.KubernetesVersions)
	require.Len(t, d.Interfaces, 2)
	k := d.Interfaces[1].(KubernetesInterface)
	require.Equal(t, "magnum-<keystone project id>", k.NamespaceRule)
	require.Contains(t, k.Resources, "devmachines.infrastructure.cluster.x-k8s.io")
	require.Empty(t, k.APIs, "no tenant API")
	require.NotContains(t, k.Resources, "magnumclusters.coe.magnum.openstack.org")
	require.False(t, d.StorageClasses.Available)
	require.Contains(t, d.StorageClasses.Note, "no Cinder")
	require.NotEmpty(t, d.Labels)
	found := false
	for _, l := range d.Labels {
		if l.Name == "kube_tag" {
			found = true
			require.True(t, l.Implemented)
		}
	}
	require.True(t, found)
	body, err := json.Marshal(d)
	require.NoError(t, err)
	validateAgainstSchema(t, body)

	// Without the tenant view, with Cinder, with nothing in the cloud: still valid.
	d = Build(Facts{VolumeTypes: []string{"lvmdriver-1"}}, Settings{Flavor: templates.FlavorOpenStack, NamespacePrefix: "magnum-",
		DefaultKubernetesVersion: "v1.36.3"}, now)
	require.Len(t, d.Interfaces, 1)
	require.Contains(t, d.StorageClasses.Note, "lvmdriver-1")
	require.True(t, d.StorageClasses.Available)
	require.Equal(t, []string{"cinder"}, d.StorageClasses.Classes, "the add-ons' default class")
	body, err = json.Marshal(d)
	require.NoError(t, err)
	validateAgainstSchema(t, body)

	// The schema is not a rubber stamp.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(body, &doc))
	doc["node_types"] = []any{map[string]any{"name": "x", "id": "1", "vcpus": 0, "ram_mib": 1, "disk_gib": 0}}
	bad, _ := json.Marshal(doc)
	require.Error(t, ValidateDocument(bad, "../../docs/managed-kubernetes.schema.json"))

	// With the tenant API the kubernetes-native interface lists MagnumCluster, in the project's namespace.
	s.TenantAPI = true
	d = Build(seedFacts(), s, now)
	require.Len(t, d.Interfaces, 2)
	k = d.Interfaces[1].(KubernetesInterface)
	require.Equal(t, []KubernetesAPI{{Group: "coe.magnum.openstack.org", Version: "v1alpha1", Kind: "MagnumCluster",
		Resource: "magnumclusters", Namespace: "magnum-<keystone project id>"}}, k.APIs)
	require.Contains(t, k.Resources, "magnumclusters.coe.magnum.openstack.org")
	require.Contains(t, k.Access, "magnum.openstack.org/application-credential")
	body, err = json.Marshal(d)
	require.NoError(t, err)
	validateAgainstSchema(t, body)
	var withAPI map[string]any
	require.NoError(t, json.Unmarshal(body, &withAPI))
	apis := withAPI["interfaces"].([]any)[1].(map[string]any)["apis"]
	require.Equal(t, []any{map[string]any{"group": "coe.magnum.openstack.org", "version": "v1alpha1", "kind": "MagnumCluster",
		"resource": "magnumclusters", "namespace": "magnum-<keystone project id>"}}, apis)
	// An api without its namespace is not valid.
	delete(apis.([]any)[0].(map[string]any), "namespace")
	bad, _ = json.Marshal(withAPI)
	require.Error(t, ValidateDocument(bad, "../../docs/managed-kubernetes.schema.json"))
	// The tenant API without the tenant view: no kubernetes-native interface at all.
	d = Build(seedFacts(), Settings{Flavor: templates.FlavorInMemory, NamespacePrefix: "magnum-", DefaultKubernetesVersion: "v1.36.3",
		TenantAPI: true}, now)
	require.Len(t, d.Interfaces, 1)
}

func TestHandlerCache(t *testing.T) {
	src := &fixedSource{facts: seedFacts()}
	h := NewHandler(src, Settings{Flavor: templates.FlavorInMemory, NamespacePrefix: "magnum-", DefaultKubernetesVersion: "v1.36.3"}, time.Minute, nil)
	now := time.Now()
	h.now = func() time.Time { return now }
	get := func() (*httptest.ResponseRecorder, Document) {
		rec := httptest.NewRecorder()
		h.Mux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, WellKnownPath, nil))
		var d Document
		if rec.Code == http.StatusOK {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &d))
			validateAgainstSchema(t, rec.Body.Bytes())
		}
		return rec, d
	}
	rec, d := get()
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Len(t, d.NodeTypes, 2)

	// A new flavor: not before the TTL, on the first request after it.
	src.mu.Lock()
	src.facts.Flavors = append(src.facts.Flavors, NodeType{Name: "m1.xlarge", ID: "9", VCPUs: 8, RAMMiB: 16384, DiskGiB: 160})
	src.mu.Unlock()
	now = now.Add(59 * time.Second)
	_, d = get()
	require.Len(t, d.NodeTypes, 2)
	require.Equal(t, 1, src.calls)
	now = now.Add(2 * time.Second)
	_, d = get()
	require.Len(t, d.NodeTypes, 3)
	require.Equal(t, 2, src.calls)

	// The cloud fails: the old document for another TTL, marked stale; then 503.
	src.err = errors.New("keystone down")
	now = now.Add(61 * time.Second)
	rec, d = get()
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Warning"))
	require.Len(t, d.NodeTypes, 3)
	now = now.Add(61 * time.Second)
	rec, _ = get()
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)

	rec = httptest.NewRecorder()
	h.Mux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/other", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	rec = httptest.NewRecorder()
	h.Mux().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WellKnownPath, bytes.NewReader(nil)))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestSchemaFileIsValidJSON(t *testing.T) {
	b, err := os.ReadFile("../../docs/managed-kubernetes.schema.json")
	require.NoError(t, err)
	require.True(t, json.Valid(b))
}

// kubernetes_versions lists exactly what a create would be accepted with: the conductor's check
// (templates.CheckKubernetesVersion, templates.Preflight) on every public image and template.
func TestKubernetesVersionsAreWhatACreateAccepts(t *testing.T) {
	f := seedFacts()
	f.Images = append(f.Images,
		Image{ID: "i5", Name: "ubuntu-2204-kube-v1.29.6", OSDistro: "ubuntu", KubeVersion: "v1.29.6"}, // older than Cluster API v1.14's
		Image{ID: "i6", Name: "ubuntu-2404-kube-v1.37.1", OSDistro: "ubuntu"})                         // newer than the add-on table
	f.Templates = []Template{
		{Name: "k8s-v1.36", ImageID: "i2", COE: "kubernetes"},
		{Name: "by-name", ImageID: "ubuntu-2404-kube-v1.35.4", COE: "kubernetes"},
		{Name: "by-id-with-its-tag", ImageID: "i1", COE: "kubernetes", Labels: map[string]string{"kube_tag": "v1.35.4"}},
		{Name: "by-id-default", ImageID: "i1", COE: "kubernetes"}, // the default v1.36.3 on a v1.35.4 image
		{Name: "mismatch", ImageID: "i2", COE: "kubernetes", Labels: map[string]string{"kube_tag": "v1.35.4"}},
		{Name: "future", ImageID: "i4", COE: "kubernetes", Labels: map[string]string{"kube_tag": "v1.99.0"}},
		{Name: "old-image", ImageID: "i5", COE: "kubernetes"},
		{Name: "bad-label", ImageID: "i2", COE: "kubernetes", Labels: map[string]string{"master_lb_floating_ip_enabled": "maybe"}},
		{Name: "not-offered", ImageID: "i2", COE: "kubernetes", Labels: map[string]string{"capi_infrastructure": "openstack"}},
	}
	s := Settings{Flavor: templates.FlavorInMemory, AllowedFlavors: []templates.Flavor{templates.FlavorInMemory},
		NamespacePrefix: "magnum-", DefaultKubernetesVersion: "v1.36.3"}
	d := Build(f, s, time.Now())
	require.Equal(t, []KubernetesVersion{
		{Version: "v1.36.3", Images: []string{"ubuntu-2404-kube-v1.36.3"}, Templates: []string{"k8s-v1.36"}},
		{Version: "v1.35.4", Images: []string{"ubuntu-2404-kube-v1.35.4"}, Templates: []string{"by-id-with-its-tag", "by-name"}},
	}, d.KubernetesVersions)

	// The operator's allowance lets kube_tag differ from the image: still inside the range only.
	s.AllowKubeTagImageMismatch = true
	d = Build(f, s, time.Now())
	require.Equal(t, []KubernetesVersion{
		{Version: "v1.36.3", Images: []string{"ubuntu-2404-kube-v1.36.3"}, Templates: []string{"k8s-v1.36"}},
		{Version: "v1.35.4", Images: []string{"ubuntu-2404-kube-v1.35.4"}, Templates: []string{"by-id-with-its-tag", "by-name", "mismatch"}},
	}, d.KubernetesVersions)

	// A range of the operator's (tests, a future add-on table) is honoured as given.
	s.AllowKubeTagImageMismatch = false
	s.KubernetesVersions = templates.MinorRange("v1.36", "v1.37")
	d = Build(f, s, time.Now())
	require.Equal(t, []KubernetesVersion{
		{Version: "v1.37.1", Images: []string{"ubuntu-2404-kube-v1.37.1"}},
		{Version: "v1.36.3", Images: []string{"ubuntu-2404-kube-v1.36.3"}, Templates: []string{"k8s-v1.36"}},
	}, d.KubernetesVersions)
}
