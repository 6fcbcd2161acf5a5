package fakeopenstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// servers starts the three services of one Cloud on httptest servers.
func servers(t *testing.T, seed Seed, opts ...Option) (*Cloud, map[Service]*httptest.Server) {
	t.Helper()
	cloud, err := New(seed, opts...)
	require.NoError(t, err)
	srvs := map[Service]*httptest.Server{}
	for _, svc := range Services {
		srv := httptest.NewServer(cloud.Handler(svc))
		t.Cleanup(srv.Close)
		srvs[svc] = srv
	}
	return cloud, srvs
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, rawURL string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

func getJSON(t *testing.T, rawURL string, into any) response {
	t.Helper()
	r := do(t, http.MethodGet, rawURL, map[string]string{"X-Auth-Token": "gAAAAA-test-token"})
	if r.status == http.StatusOK {
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.NoError(t, json.Unmarshal(r.body, into), string(r.body))
	}
	return r
}

type imageList struct {
	Images []map[string]any `json:"images"`
	First  string           `json:"first"`
	Next   string           `json:"next"`
	Schema string           `json:"schema"`
}

func imageNames(l imageList) []string {
	var names []string
	for _, img := range l.Images {
		names = append(names, img["name"].(string))
	}
	return names
}

func TestImageListFiltersByNameFieldAndProperty(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	base := srv[ImageService].URL + "/v2/images"

	cases := []struct {
		query string
		want  []string
	}{
		// The exact request magnum-api (glanceclient) makes for an image given by name.
		{"name=ubuntu-2404-kube-v1.36.3&limit=200", []string{"ubuntu-2404-kube-v1.36.3"}},
		{"", []string{"ubuntu-2404-kube-v1.35.4", "ubuntu-2404-kube-v1.36.3"}},
		{"os_distro=ubuntu", []string{"ubuntu-2404-kube-v1.35.4", "ubuntu-2404-kube-v1.36.3"}},
		{"kube_version=v1.35.4", []string{"ubuntu-2404-kube-v1.35.4"}},
		{"os_distro=fedora-coreos", nil},
		{"name=no-such-image", nil},
		{"no_such_property=x", nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			var l imageList
			r := getJSON(t, base+"?"+tc.query, &l)
			require.Equal(t, http.StatusOK, r.status, string(r.body))
			assert.Equal(t, tc.want, imageNames(l))
			assert.Equal(t, "/v2/schemas/images", l.Schema)
			assert.Empty(t, l.Next)
		})
	}
}

func TestImageDocumentCarriesWhatMagnumReads(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	var img map[string]any
	r := getJSON(t, srv[ImageService].URL+"/v2/images/"+ImageKube1363ID, &img)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, ImageKube1363ID, img["id"])
	assert.Equal(t, "ubuntu-2404-kube-v1.36.3", img["name"])
	assert.Equal(t, "active", img["status"])
	assert.Equal(t, "ubuntu", img["os_distro"], "magnum-api copies os_distro into cluster_distro")
	assert.Equal(t, "v1.36.3", img["kube_version"], "custom properties are top-level strings in Glance v2")
	assert.Equal(t, "/v2/images/"+ImageKube1363ID, img["self"])

	var other map[string]any
	getJSON(t, srv[ImageService].URL+"/v2/images/"+ImageKube1354ID, &other)
	assert.Equal(t, "v1.35.4", other["kube_version"])
}

func TestImagePagination(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	var first imageList
	r := getJSON(t, srv[ImageService].URL+"/v2/images?limit=1&os_distro=ubuntu", &first)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, []string{"ubuntu-2404-kube-v1.35.4"}, imageNames(first))
	require.NotEmpty(t, first.Next)
	next, err := url.Parse(first.Next)
	require.NoError(t, err)
	assert.Equal(t, ImageKube1354ID, next.Query().Get("marker"))
	assert.Equal(t, "ubuntu", next.Query().Get("os_distro"), "the next link keeps the filters")

	var second imageList
	getJSON(t, srv[ImageService].URL+first.Next, &second)
	assert.Equal(t, []string{"ubuntu-2404-kube-v1.36.3"}, imageNames(second))
	assert.Empty(t, second.Next)

	for _, bad := range []string{"limit=-1", "limit=ten", "marker=" + PublicNetworkID} {
		r := do(t, http.MethodGet, srv[ImageService].URL+"/v2/images?"+bad, nil)
		assert.Equal(t, http.StatusBadRequest, r.status, bad)
	}
}

func TestImageGetUnknownIs404(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	r := do(t, http.MethodGet, srv[ImageService].URL+"/v2/images/00000000-0000-0000-0000-000000000000", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, string(r.body), "No image found with ID 00000000-0000-0000-0000-000000000000")
}

// glanceclient validates every image it fetches against /v2/schemas/image: each field must have the
// JSON type the schema declares, and undeclared fields must be strings (additionalProperties).
func TestImageSchemaAcceptsEveryServedImage(t *testing.T) {
	seed := DefaultSeed()
	seed.Images = append(seed.Images, Image{ID: "11111111-2222-4333-8444-555555555555", Name: "bare"})
	_, srv := servers(t, seed)
	var schema struct {
		Properties           map[string]struct{ Type any } `json:"properties"`
		AdditionalProperties struct{ Type string }         `json:"additionalProperties"`
	}
	r := getJSON(t, srv[ImageService].URL+"/v2/schemas/image", &schema)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "string", schema.AdditionalProperties.Type)

	jsonType := func(v any) string {
		switch v.(type) {
		case nil:
			return "null"
		case string:
			return "string"
		case bool:
			return "boolean"
		case float64:
			return "integer" // the fake only emits whole numbers
		case []any:
			return "array"
		default:
			return fmt.Sprintf("%T", v)
		}
	}
	var l imageList
	getJSON(t, srv[ImageService].URL+"/v2/images", &l)
	require.Len(t, l.Images, 3)
	for _, img := range l.Images {
		for field, value := range img {
			got := jsonType(value)
			prop, declared := schema.Properties[field]
			if !declared {
				assert.Equal(t, "string", got, "undeclared field %s of %s", field, img["name"])
				continue
			}
			var allowed []string
			switch ty := prop.Type.(type) {
			case string:
				allowed = []string{ty}
			case []any:
				for _, x := range ty {
					allowed = append(allowed, x.(string))
				}
			}
			assert.Contains(t, allowed, got, "field %s of %s", field, img["name"])
		}
	}
}

type flavorList struct {
	Flavors []map[string]any `json:"flavors"`
}

func TestFlavorsListDetailAndGet(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	compute := srv[ComputeService].URL + "/v2.1"

	var brief flavorList
	r := getJSON(t, compute+"/flavors", &brief)
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, brief.Flavors, 3)
	for _, f := range brief.Flavors {
		assert.NotContains(t, f, "ram", "the plain list has no details")
		assert.Contains(t, f, "links")
	}

	// The exact request magnum-api (novaclient) makes to find a flavor by name or id.
	var detail flavorList
	getJSON(t, compute+"/flavors/detail", &detail)
	byName := map[string]map[string]any{}
	for _, f := range detail.Flavors {
		byName[f["name"].(string)] = f
	}
	require.ElementsMatch(t, []string{"m1.small", "m1.medium", "m1.large"}, slices.Collect(maps.Keys(byName)))
	for name, f := range byName {
		assert.Greater(t, f["disk"].(float64), 0.0, "%s needs a root disk", name)
		assert.Greater(t, f["ram"].(float64), 0.0, name)
		assert.Greater(t, f["vcpus"].(float64), 0.0, name)
		assert.Equal(t, true, f["os-flavor-access:is_public"], name)
	}
	assert.Equal(t, 4096.0, byName["m1.medium"]["ram"])

	var one struct{ Flavor map[string]any }
	r = getJSON(t, compute+"/flavors/3", &one)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "m1.medium", one.Flavor["name"])

	var large flavorList
	getJSON(t, compute+"/flavors/detail?minDisk=50", &large)
	require.Len(t, large.Flavors, 1)
	assert.Equal(t, "m1.large", large.Flavors[0]["name"])

	var specs struct {
		ExtraSpecs map[string]string `json:"extra_specs"`
	}
	r = getJSON(t, compute+"/flavors/3/os-extra_specs", &specs)
	require.Equal(t, http.StatusOK, r.status)
	assert.NotNil(t, specs.ExtraSpecs, "a flavor without extra specs has an empty map")
	assert.Equal(t, http.StatusNotFound, do(t, http.MethodGet, compute+"/flavors/99/os-extra_specs", nil).status)

	r = do(t, http.MethodGet, compute+"/flavors/99", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.JSONEq(t, `{"itemNotFound":{"code":404,"message":"Flavor 99 could not be found."}}`, string(r.body))
	assert.Equal(t, http.StatusBadRequest, do(t, http.MethodGet, compute+"/flavors/detail?minRam=x", nil).status)
}

func TestComputeEchoesRequestedMicroversion(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	r := do(t, http.MethodGet, srv[ComputeService].URL+"/v2.1/flavors/detail",
		map[string]string{"X-OpenStack-Nova-API-Version": "2.15"})
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "2.15", r.header.Get("X-OpenStack-Nova-API-Version"))
	r = do(t, http.MethodGet, srv[ComputeService].URL+"/v2.1/flavors", nil)
	assert.Empty(t, r.header.Get("X-OpenStack-Nova-API-Version"), "nothing asked, nothing echoed")
}

func TestKeypairDefaultForAnyUser(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	for _, user := range []string{"", "4f0e1b1c2d3e4f5061728394a5b6c7d8", "another-user"} {
		var body struct{ Keypair map[string]any }
		rawURL := srv[ComputeService].URL + "/v2.1/os-keypairs/default"
		if user != "" {
			rawURL += "?user_id=" + user
		}
		r := getJSON(t, rawURL, &body)
		require.Equal(t, http.StatusOK, r.status, user)
		kp := body.Keypair
		assert.Equal(t, "default", kp["name"])
		assert.True(t, strings.HasPrefix(kp["public_key"].(string), "ssh-ed25519 "))
		// What `ssh-keygen -E md5 -lf` prints for the default public key.
		assert.Equal(t, "40:7e:fd:0d:a6:86:80:24:27:8d:7a:c0:80:6b:5d:07", kp["fingerprint"])
		assert.Equal(t, "ssh", kp["type"])
		if user != "" {
			assert.Equal(t, user, kp["user_id"])
		}
	}

	r := do(t, http.MethodGet, srv[ComputeService].URL+"/v2.1/os-keypairs/missing", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, string(r.body), `"itemNotFound"`)
	assert.Contains(t, string(r.body), "Keypair missing not found")
}

type networkList struct {
	Networks []map[string]any `json:"networks"`
}

func TestNetworksFilteredByRouterExternal(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	network := srv[NetworkService].URL + "/v2.0"
	names := func(query string) []string {
		var l networkList
		r := getJSON(t, network+"/networks?"+query, &l)
		require.Equal(t, http.StatusOK, r.status, query)
		var out []string
		for _, n := range l.Networks {
			out = append(out, n["name"].(string))
		}
		return out
	}
	// The exact request magnum-api (neutronclient) makes for --external-network.
	assert.Equal(t, []string{"public"}, names("router%3Aexternal=True"))
	assert.Equal(t, []string{"public"}, names("router:external=true"))
	assert.Equal(t, []string{"private"}, names("router:external=False"))
	assert.Equal(t, []string{"public", "private"}, names(""))
	assert.Equal(t, []string{"public"}, names("name=public"))
	assert.Equal(t, []string{"public", "private"}, names("name=public&name=private"), "repeated filters mean OR")
	assert.Equal(t, []string{"public"}, names("id="+PublicNetworkID+"&fields=id&fields=name"))
	assert.Empty(t, names("router:external=maybe"))
	assert.Empty(t, names("no_such_attribute=1"))

	var one struct{ Network map[string]any }
	r := getJSON(t, network+"/networks/"+PublicNetworkID, &one)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, true, one.Network["router:external"])
	assert.Equal(t, []any{PublicSubnetID}, one.Network["subnets"])

	r = do(t, http.MethodGet, network+"/networks/not-a-network", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.JSONEq(t, `{"NeutronError":{"type":"NetworkNotFound","message":"Network not-a-network could not be found.","detail":""}}`, string(r.body))
}

func TestSubnetsListAndGet(t *testing.T) {
	_, srv := servers(t, DefaultSeed())
	network := srv[NetworkService].URL + "/v2.0"
	var l struct{ Subnets []map[string]any }
	r := getJSON(t, network+"/subnets?network_id="+PublicNetworkID, &l)
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, l.Subnets, 1)
	assert.Equal(t, "172.24.4.0/24", l.Subnets[0]["cidr"])
	assert.Equal(t, 4.0, l.Subnets[0]["ip_version"])

	getJSON(t, network+"/subnets", &l)
	assert.Len(t, l.Subnets, 2)

	var one struct{ Subnet map[string]any }
	r = getJSON(t, network+"/subnets/"+PrivateSubnetID, &one)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, PrivateNetworkID, one.Subnet["network_id"])

	r = do(t, http.MethodGet, network+"/subnets/nope", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, string(r.body), "SubnetNotFound")
}

func TestEverythingElseIs404AndLogged(t *testing.T) {
	var sink bytes.Buffer
	cloud, srv := servers(t, DefaultSeed(), WithRequestLog(&sink))
	cases := []struct {
		svc          Service
		method, path string
	}{
		{ImageService, http.MethodPost, "/v2/images"},
		{ImageService, http.MethodDelete, "/v2/images/" + ImageKube1363ID},
		{ImageService, http.MethodGet, "/v1/images"}, // "/" is the version document (versions.go)
		{ImageService, http.MethodGet, "/v2/schemas/images"},
		{ComputeService, http.MethodGet, "/v2.1/os-hypervisors"}, // servers are simulated (servers.go)
		{ComputeService, http.MethodPost, "/v2.1/os-keypairs"},
		{ComputeService, http.MethodPut, "/v2.1/flavors/2"}, // create and delete exist (flavors.go), update does not
		{NetworkService, http.MethodGet, "/v2.0/trunks"},    // ports, routers… are simulated (neutron.go), trunks not
		{NetworkService, http.MethodPut, "/v2.0/qos/policies/" + PublicNetworkID},
		{NetworkService, http.MethodGet, "/v2.0"},
	}
	for _, tc := range cases {
		r := do(t, tc.method, srv[tc.svc].URL+tc.path, nil)
		assert.Equal(t, http.StatusNotFound, r.status, "%s %s %s", tc.svc, tc.method, tc.path)
	}
	log := cloud.Requests()
	require.Len(t, log, len(cases))
	for i, tc := range cases {
		assert.Equal(t, tc.svc, log[i].Service)
		assert.Equal(t, tc.method, log[i].Method)
		assert.Equal(t, tc.path, log[i].Path)
		assert.Equal(t, http.StatusNotFound, log[i].Status)
		assert.Empty(t, log[i].Route, "unknown routes have no route pattern")
	}
	assert.Equal(t, len(cases), strings.Count(sink.String(), "\n"), "one JSON line per request")
}

func TestRequestLogRecordsTokenPresenceButNeverTheToken(t *testing.T) {
	var sink bytes.Buffer
	cloud, srv := servers(t, DefaultSeed(), WithRequestLog(&sink), WithHistory(2))
	const token = "gAAAAABsecret-token-value"
	do(t, http.MethodGet, srv[ImageService].URL+"/v2/images?name=x", map[string]string{"X-Auth-Token": token})
	do(t, http.MethodGet, srv[ComputeService].URL+"/v2.1/flavors/detail", nil)
	do(t, http.MethodGet, srv[NetworkService].URL+"/v2.0/networks?router%3Aexternal=True",
		map[string]string{"X-Auth-Token": token, "User-Agent": "python-neutronclient"})

	log := cloud.Requests()
	require.Len(t, log, 2, "history keeps the last two")
	assert.Equal(t, ComputeService, log[0].Service)
	assert.False(t, log[0].Token)
	assert.Equal(t, "GET /v2.1/flavors/detail", log[0].Route)
	assert.Equal(t, NetworkService, log[1].Service)
	assert.True(t, log[1].Token)
	assert.Equal(t, "router%3Aexternal=True", log[1].Query)
	assert.Equal(t, "python-neutronclient", log[1].UserAgent)
	assert.Equal(t, http.StatusOK, log[1].Status)

	assert.NotContains(t, sink.String(), token)
	lines := strings.Split(strings.TrimSpace(sink.String()), "\n")
	require.Len(t, lines, 3, "the sink gets every request, not only the kept history")
	var first Request
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, ImageService, first.Service)
	assert.True(t, first.Token)
}

func TestSeedFileExtendsAndOverridesDefaults(t *testing.T) {
	seed, err := LoadSeed([]byte(`{
		"images": [
			{"id": "` + ImageKube1363ID + `", "name": "renamed", "os_distro": "flatcar"},
			{"id": "aaaaaaaa-0000-4000-8000-000000000001", "name": "debian-12-kube-v1.36.3", "os_distro": "debian",
			 "properties": {"kube_version": "v1.36.3"}}
		],
		"flavors": [{"id": "10", "name": "c1.huge", "vcpus": 16, "ram": 65536, "disk": 200}],
		"keypairs": [{"name": "default", "public_key": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC0 other"}]
	}`))
	require.NoError(t, err)
	require.Len(t, seed.Images, 3)
	assert.Equal(t, "renamed", seed.Images[1].Name, "same id replaces in place")
	assert.Equal(t, "flatcar", seed.Images[1].OSDistro)
	assert.Equal(t, "debian-12-kube-v1.36.3", seed.Images[2].Name)
	assert.Len(t, seed.Flavors, 4)
	require.Len(t, seed.Keypairs, 1, "same name replaces the default keypair")
	assert.Contains(t, seed.Keypairs[0].PublicKey, "ssh-rsa")
	assert.Len(t, seed.Networks, 2, "sections the file leaves out keep their defaults")

	only, err := LoadSeed([]byte(`{"replace_defaults": true,
		"images": [{"id": "i1", "name": "only"}], "networks": [{"id": "n1", "name": "ext", "external": true}]}`))
	require.NoError(t, err)
	assert.Len(t, only.Images, 1)
	assert.Empty(t, only.Flavors)
	assert.False(t, only.ReplaceDefaults)
}

func TestSeedErrorsAreReported(t *testing.T) {
	cases := map[string]string{
		`{"imagez": []}`: `unknown field "imagez"`,
		`{"images": {}}`: "cannot unmarshal",
		`{} {}`:          "trailing data",
		`{"flavors": [{"id": "2", "name": "m1.tiny", "vcpus": 1, "ram": 512}]}`:                 "", // replaces m1.small: fine
		`{"flavors": [{"id": "9", "name": "m1.small", "vcpus": 1, "ram": 512}]}`:                `flavor name "m1.small": duplicate`,
		`{"flavors": [{"id": "9", "name": "z", "vcpus": 0, "ram": 512}]}`:                       "vcpus and ram must be positive",
		`{"subnets": [{"id": "s9", "name": "x", "network_id": "nope", "cidr": "10.9.0.0/24"}]}`: `network_id "nope" is not a seeded network`,
		`{"keypairs": [{"name": "k", "public_key": "not-a-key"}]}`:                              `keypair "k": public_key`,
		`{"keypairs": [{"name": "k", "public_key": "ssh-ed25519 !!!"}]}`:                        "not base64",
		`{"images": [{"id": "", "name": "x"}]}`:                                                 "image: empty id",
		`{"images": [{"id": "i", "name": "x", "properties": {"size": "1"}}]}`:                   `property "size" collides`,
	}
	for input, want := range cases {
		_, err := LoadSeed([]byte(input))
		if want == "" {
			assert.NoError(t, err, input)
			continue
		}
		if assert.Error(t, err, input) {
			assert.Contains(t, err.Error(), want, input)
		}
	}
	_, err := New(Seed{Keypairs: []Keypair{{Name: "bad", PublicKey: "x"}}})
	assert.Error(t, err, "New refuses an invalid seed too")
}

func TestHandlerPanicsOnUnknownService(t *testing.T) {
	cloud, err := New(DefaultSeed())
	require.NoError(t, err)
	assert.Panics(t, func() { cloud.Handler("volume") })
}

// What Horizon's magnum-ui dialogs ask the cloud for besides magnum-api: without the keypair list
// the template dialog offers no keypair, and without the zones the Create Cluster dialog never opens.
// Neutron's extension list is asked before most network calls.
func TestHorizonDialogLookups(t *testing.T) {
	cloud, srv := servers(t, DefaultSeed())

	var keypairs struct {
		Keypairs []struct{ Keypair map[string]any }
	}
	r := getJSON(t, srv[ComputeService].URL+"/v2.1/os-keypairs", &keypairs)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Len(t, keypairs.Keypairs, len(DefaultSeed().Keypairs))
	kp := keypairs.Keypairs[0].Keypair
	assert.Equal(t, "default", kp["name"])
	assert.Equal(t, "40:7e:fd:0d:a6:86:80:24:27:8d:7a:c0:80:6b:5d:07", kp["fingerprint"], "the same as the single GET")
	assert.Equal(t, "ssh", kp["type"])
	assert.True(t, strings.HasPrefix(kp["public_key"].(string), "ssh-ed25519 "))

	var zones struct {
		AvailabilityZoneInfo []struct {
			ZoneName  string
			ZoneState struct{ Available bool }
			Hosts     any
		}
	}
	r = getJSON(t, srv[ComputeService].URL+"/v2.1/os-availability-zone", &zones)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Len(t, zones.AvailabilityZoneInfo, 1)
	assert.Equal(t, "nova", zones.AvailabilityZoneInfo[0].ZoneName)
	assert.True(t, zones.AvailabilityZoneInfo[0].ZoneState.Available)
	assert.Contains(t, string(r.body), `"hosts":null`)

	var extensions struct{ Extensions []any }
	r = getJSON(t, srv[NetworkService].URL+"/v2.0/extensions", &extensions)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.NotNil(t, extensions.Extensions)
	assert.Empty(t, extensions.Extensions)
	assert.Contains(t, string(r.body), `"extensions":[]`)

	for _, req := range cloud.Requests() {
		assert.NotEmpty(t, req.Route, "%s %s is a known route", req.Method, req.Path)
	}
}
