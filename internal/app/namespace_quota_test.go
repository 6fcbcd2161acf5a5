package app

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

const quotaBase = `
[database]
connection = mysql://u@127.0.0.1/m
[certificates]
cert_manager_type = x509keypair
[bridge]
default_infrastructure = inmemory
`

func quotaOptions(t *testing.T, bridgeLines string) (*Options, error) {
	t.Helper()
	f, err := config.Parse(quotaBase + bridgeLines)
	require.NoError(t, err)
	return optionsFrom(f, nil)
}

func TestNamespaceQuotaDefaults(t *testing.T) {
	o, err := quotaOptions(t, "")
	require.NoError(t, err)
	q := o.Bridge.NamespaceQuota
	want := map[corev1.ResourceName]string{
		"count/clusters.cluster.x-k8s.io": "50", "count/clusterclasses.cluster.x-k8s.io": "50",
		"count/machinedeployments.cluster.x-k8s.io": "500", "count/machinesets.cluster.x-k8s.io": "1000",
		"count/machines.cluster.x-k8s.io": "2000", "secrets": "3000", "configmaps": "100", "pods": "0", "services": "0",
	}
	require.Len(t, q, len(want))
	for name, v := range want {
		got, ok := q[name]
		require.True(t, ok, name)
		require.Zero(t, got.Cmp(resource.MustParse(v)), "%s = %s", name, got.String())
	}
}

func TestNamespaceQuotaFromConfiguration(t *testing.T) {
	// Both separators (= and oslo's dict ":"), spaces, a trailing comma, a suffixed quantity.
	o, err := quotaOptions(t, "namespace_quota = count/clusters.cluster.x-k8s.io=3, secrets : 40 ,requests.storage=10Gi,\n")
	require.NoError(t, err)
	require.Equal(t, corev1.ResourceList{
		"count/clusters.cluster.x-k8s.io": resource.MustParse("3"),
		"secrets":                         resource.MustParse("40"),
		"requests.storage":                resource.MustParse("10Gi"),
	}, o.Bridge.NamespaceQuota)

	// Empty: a quota without limits (not the defaults).
	o, err = quotaOptions(t, "namespace_quota =\n")
	require.NoError(t, err)
	require.NotNil(t, o.Bridge.NamespaceQuota)
	require.Empty(t, o.Bridge.NamespaceQuota)
}

// A bad value is refused at start-up with an error naming [bridge] namespace_quota and the item.
func TestNamespaceQuotaErrorsNameTheKey(t *testing.T) {
	cases := map[string]string{
		"bad quantity":      "secrets=lots",
		"negative":          "count/machines.cluster.x-k8s.io=-1",
		"no separator":      "secrets",
		"unknown plain":     "clusters=5",
		"not a name":        "count/Clusters!=5",
		"twice":             "secrets=1, secrets=2",
		"empty name":        "=5",
		"quantity with sep": "pods=1=2",
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := quotaOptions(t, "namespace_quota = "+value+"\n")
			require.Error(t, err)
			var ce *config.Error
			require.True(t, errors.As(err, &ce), "%T %v", err, err)
			require.Equal(t, "bridge", ce.Section)
			require.Equal(t, "namespace_quota", ce.Key)
			require.Contains(t, err.Error(), "[bridge] namespace_quota: ")
		})
	}
}
