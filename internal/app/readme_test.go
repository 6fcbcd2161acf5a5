package app

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The README's sample [bridge] section means what it says: oslo.config (and the bridge) keep
// `key = value ; text` as the value "value ; text", so no value may carry a comment.
func TestREADMESampleConfigurationParses(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```ini\n(\\[bridge\\].*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "README.md has an ini block with the [bridge] section")
	f, err := config.Parse(string(m[1]))
	require.NoError(t, err)
	for _, key := range []string{"kubeconfig", "namespace_prefix", "default_infrastructure", "default_kubernetes_version", "namespace_quota",
		"require_admission_policies", "leader_election", "allow_kube_tag_image_mismatch"} {
		v, ok := f.Lookup("bridge", key)
		require.True(t, ok, key)
		require.False(t, strings.ContainsAny(v, ";#"), "[bridge] %s = %q carries a comment", key, v)
	}
	require.Equal(t, "magnum-", f.String("bridge", "namespace_prefix", ""))
	require.Equal(t, "openstack", f.String("bridge", "default_infrastructure", ""))
	_, err = capi.ParseNamespaceQuota(f.String("bridge", "namespace_quota", ""))
	require.NoError(t, err)
	for _, key := range []string{"require_admission_policies", "leader_election", "allow_kube_tag_image_mismatch"} {
		_, err := f.Bool("bridge", key, false)
		require.NoError(t, err, key)
	}
}
