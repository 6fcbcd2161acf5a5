package fakeopenstack

import "net/http"

// Version discovery at the root of the image and network endpoints. magnum-api 23 (openstacksdk)
// starts every image and network lookup with GET / to find the API version under the catalog's
// unversioned URL; without an answer it gives up and reports the image as lacking os_distro. Zed's
// glanceclient and neutronclient append the version themselves and never ask.

// imageVersions answers like Glance: 300 Multiple Choices listing the v2 API as current.
func imageVersions(w http.ResponseWriter, r *http.Request) {
	self := "http://" + r.Host + "/v2/"
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": []map[string]any{{
		"id": "v2.16", "status": "CURRENT",
		"links": []map[string]string{{"rel": "self", "href": self}},
	}}})
}

// networkVersions answers like Neutron: 200 with its one API version, v2.0.
func networkVersions(w http.ResponseWriter, r *http.Request) {
	self := "http://" + r.Host + "/v2.0/"
	writeJSON(w, http.StatusOK, map[string]any{"versions": []map[string]any{{
		"id": "v2.0", "status": "CURRENT",
		"links": []map[string]string{{"rel": "self", "href": self}},
	}}})
}

// volumeVersions answers like Cinder: its v3 API with the microversion range the simulator claims.
func volumeVersions(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		self := "http://" + r.Host + "/v3/"
		writeJSON(w, status, map[string]any{"versions": []map[string]any{{
			"id": "v3.0", "status": "CURRENT", "version": "3.70", "min_version": "3.0", "updated": "2023-08-31T00:00:00Z",
			"links": []map[string]string{{"rel": "self", "href": self}},
		}}})
	}
}
