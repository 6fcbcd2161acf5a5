package fakeopenstack

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionDiscovery: the image and network roots list their API with a self link under the
// address the client used, as openstacksdk (magnum-api 23) discovers it.
func TestVersionDiscovery(t *testing.T) {
	_, srvs := servers(t, DefaultSeed())
	for svc, want := range map[Service]struct {
		status int
		id     string
		path   string
	}{
		ImageService:   {http.StatusMultipleChoices, "v2.16", "/v2/"},
		NetworkService: {http.StatusOK, "v2.0", "/v2.0/"},
		VolumeService:  {http.StatusMultipleChoices, "v3.0", "/v3/"},
	} {
		r := do(t, http.MethodGet, srvs[svc].URL+"/", nil)
		require.Equal(t, want.status, r.status, "%s: %s", svc, r.body)
		var doc struct {
			Versions []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
				Links  []struct {
					Rel  string `json:"rel"`
					Href string `json:"href"`
				} `json:"links"`
			} `json:"versions"`
		}
		require.NoError(t, json.Unmarshal(r.body, &doc), string(r.body))
		require.Len(t, doc.Versions, 1)
		v := doc.Versions[0]
		require.Equal(t, want.id, v.ID)
		require.Equal(t, "CURRENT", v.Status)
		require.Equal(t, []struct {
			Rel  string `json:"rel"`
			Href string `json:"href"`
		}{{"self", srvs[svc].URL + want.path}}, v.Links)
		// Only the root: other unknown paths stay 404.
		require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, srvs[svc].URL+"/nope", nil).status)
	}
}
