package templates

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDriverOf(t *testing.T) {
	const id = "bd71db63-28f3-4ac5-8e6e-d51a6470e5ff"
	cases := []struct {
		name string
		row  ClusterRow
		want Driver
		why  string
	}{
		{"the bridge's own", ClusterRow{UUID: id, Name: "web", StackID: ClusterName("web", id)}, DriverBridge, "web-bd71db63"},
		{"the bridge's, a long name starting with a digit", ClusterRow{UUID: id, Name: "1-very-long-cluster-name-that-goes-on-and-on",
			StackID: ClusterName("1-very-long-cluster-name-that-goes-on-and-on", id)}, DriverBridge, "bridge"},
		{"the bridge's, renamed since", ClusterRow{UUID: id, Name: "renamed", StackID: ClusterName("web", id)}, DriverBridge, "bridge"},
		{"the bridge's even under another driver's template", ClusterRow{UUID: id, Name: "web", StackID: "web-bd71db63", TemplateDriver: "k8s_capi_helm_v1"}, DriverBridge, "bridge"},
		{"Heat, by its template", ClusterRow{UUID: id, Name: "old", StackID: "9f1c0c4e-8a1f-4f0e-9c2e-0b1c2d3e4f50", TemplateDriver: "k8s_fedora_coreos_v1"}, DriverHeat, "k8s_fedora_coreos_v1"},
		{"Heat, by its stack id", ClusterRow{UUID: id, Name: "old", StackID: "9f1c0c4e-8a1f-4f0e-9c2e-0b1c2d3e4f50"}, DriverHeat, "Heat stack's id"},
		{"magnum-capi-helm, by its template", ClusterRow{UUID: id, Name: "k", StackID: "k-abcdefghijkl", TemplateDriver: "k8s_capi_helm_v1"}, DriverCAPIHelm, "k8s_capi_helm_v1"},
		{"magnum-capi-helm, by its release name", ClusterRow{UUID: id, Name: "My Cluster", StackID: "my-cluster-x2kq7mzpa4bt"}, DriverCAPIHelm, "<12 characters>"},
		{"magnum-cluster-api, by its template", ClusterRow{UUID: id, Name: "v", StackID: "kube-a1b2c", TemplateDriver: "k8s_cluster_api_ubuntu"}, DriverClusterAPI, "k8s_cluster_api_ubuntu"},
		{"magnum-cluster-api, by its name", ClusterRow{UUID: id, Name: "v", StackID: "kube-a1b2c"}, DriverClusterAPI, "kube-xxxxx"},
		{"no stack id", ClusterRow{UUID: id, Name: "failed"}, DriverUnknown, "no stack_id"},
		{"no stack id, the bridge's template: a create that failed before any write", ClusterRow{UUID: id, Name: "failed", TemplateDriver: BridgeTemplateDriver}, DriverUnknown, "no stack_id"},
		{"an unknown shape", ClusterRow{UUID: id, Name: "x", StackID: "Stack_42"}, DriverUnknown, "no shape"},
		{"another uuid's piece is not the bridge's", ClusterRow{UUID: id, Name: "web", StackID: "web-0000abcd"}, DriverUnknown, "no shape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := DriverOf(tc.row)
			require.Equal(t, tc.want, got, why)
			if tc.why != "bridge" {
				require.Contains(t, why, tc.why)
			}
		})
	}
}

// Every name ClusterName makes is told as the bridge's, whatever the Magnum name was.
func TestDriverOfKnowsEveryNameTheBridgeGives(t *testing.T) {
	const id = "0a1b2c3d-28f3-4ac5-8e6e-d51a6470e5ff"
	for _, name := range []string{"", "-", "web", "WEB_Prod.1", "1abc", "---x---", "ünïcode-名前", "a--b", "ends-with-dash-",
		"a-very-long-cluster-name-that-is-cut-at-thirty-characters", "012345678901234567890123456789012345", " spaced name ", "-leading"} {
		stack := ClusterName(name, id)
		d, why := DriverOf(ClusterRow{UUID: id, Name: name, StackID: stack})
		require.Equal(t, DriverBridge, d, "name %q → stack_id %q: %s", name, stack, why)
	}
}
