package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestHorizon drives Horizon's magnum-ui (Debian's openstack-dashboard 23 + python3-magnum-ui 11,
// deploy/local/horizon-up.sh) in a headless chromium as demo: a template and a cluster (1 master,
// 1 node) made through the dialogs, CREATE_COMPLETE in the table, the detail page, the CA through
// Show Certificate, Rolling Cluster Upgrade to a template made with the CLI, delete until the row is
// gone; and as alt_demo, none of it is visible. What the page shows is checked against the CLI.
// Sign Certificate and Resize Cluster do not work in magnum-ui 11 itself (docs/clients.md).
func TestHorizon(t *testing.T) {
	requireStack(t)
	pw := requireHorizon(t)
	t.Parallel()
	sfx := testutil.RandomHex(3)
	oldTmpl, newTmpl, name := "hz-"+sfx+"-v1.35", "hz-"+sfx+"-v1.36", "hz-"+sfx
	const oldVersion, newVersion = "v1.35.4", "v1.36.3"

	// The upgrade's target, made beforehand with the CLI; the dialog offers only templates of a
	// higher kube_tag than the cluster's.
	mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "create", newTmpl, "--coe", "kubernetes",
		"--image", "ubuntu-2404-kube-"+newVersion, "--external-network", "public", "--flavor", "m1.small",
		"--master-flavor", "m1.medium", "--keypair", "default", "--labels", "kube_tag="+newVersion)
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "coe", "cluster", "template", "delete", newTmpl) })
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "coe", "cluster", "template", "delete", oldTmpl) })
	// Whatever happens in the browser, the cluster does not outlive the test (runs first).
	t.Cleanup(func() {
		if c, err := showCluster(t, cloudDemo, name); err == nil {
			_, _ = openstack(t, cloudDemo, "coe", "cluster", "delete", c.UUID)
			waitGone(t, cloudDemo, c.UUID, 4*time.Minute)
		}
	})

	shots := horizonShots(t, name)
	job := horizonJob{
		Base: horizonURL, Playwright: pw, Chromium: chromium, Shots: shots, Downloads: t.TempDir(),
		Template: oldTmpl, Image: "ubuntu-2404-kube-" + oldVersion, Labels: "kube_tag=" + oldVersion,
		Cluster: name, UpgradeTo: newTmpl,
		CreateTimeout: 600, UpgradeTimeout: 600, DeleteTimeout: 300,
	}
	demo := job
	demo.User, demo.Password = "demo", cloudPassword(t, cloudDemo)
	t.Logf("screenshots: %s", shots)

	// demo: template and cluster through the dialogs, the detail page, the CA.
	demo.Phase, demo.Next = "create", "/project/cluster_templates/"
	created := runHorizon(t, demo, 20*time.Minute)
	t.Logf("Horizon: CREATE_COMPLETE %.0fs after the dialog's submit; row: %s", created.CreateSeconds, created.Row)
	require.Contains(t, created.Row, "HEALTHY", "the table's health column")
	c, err := showCluster(t, cloudDemo, created.ClusterID)
	require.NoError(t, err)
	require.Equal(t, name, c.Name)
	// The detail page shows what the API has.
	require.Equal(t, "CREATE_COMPLETE", created.detail("Status"))
	require.Equal(t, "HEALTHY", created.detail("Health Status"))
	require.NotEmpty(t, c.APIAddress)
	require.Equal(t, c.APIAddress, created.detail("API Address"))
	require.Equal(t, c.MasterAddresses, created.Details["Master Addresses"])
	require.Equal(t, c.NodeAddresses, created.Details["Node Addresses"])
	require.Len(t, c.NodeAddresses, 1)
	require.Equal(t, oldVersion, c.COEVersion)
	require.Equal(t, c.COEVersion, created.detail("COE Version"))
	// Every cluster the dialog makes carries availability_zone: no reason may call it unsupported.
	require.NotContains(t, c.StatusReason, "availability_zone", "status_reason of a Horizon-made cluster")
	// Show Certificate downloaded the cluster's CA, the same as `coe ca show`.
	ca, err := os.ReadFile(created.CAFile)
	require.NoError(t, err)
	block, _ := pem.Decode(ca)
	require.NotNil(t, block, "the downloaded CA is not PEM: %q", ca)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, cert.IsCA, "the downloaded certificate is not a CA")
	require.Equal(t, strings.TrimSpace(mustOpenstack(t, cloudDemo, "coe", "ca", "show", created.ClusterID)),
		strings.TrimSpace(string(ca)))

	// alt_demo: neither the cluster nor the template, and demo's cluster URL fails.
	alt := job
	alt.Phase, alt.Next, alt.ClusterID = "alt", "/project/clusters/", created.ClusterID
	alt.User, alt.Password = "alt_demo", cloudPassword(t, cloudAlt)
	seen := runHorizon(t, alt, 5*time.Minute)
	t.Logf("Horizon as alt_demo: clusters %q, templates %q; demo's cluster URL: %q, HTTP %d %s",
		seen.ClusterRows, seen.TemplateRows, seen.URLMessage, seen.URLStatus, seen.URLBody)
	require.NotContains(t, seen.ClusterRows, name)
	require.NotContains(t, seen.TemplateRows, oldTmpl)
	require.NotContains(t, seen.TemplateRows, newTmpl)
	require.NotEqual(t, 200, seen.URLStatus, "Horizon's REST API gave alt_demo demo's cluster")
	require.Contains(t, seen.URLBody, "could not be found")

	// demo: Rolling Cluster Upgrade, then delete.
	demo.Phase, demo.Next, demo.ClusterID = "upgrade", "/project/clusters/", created.ClusterID
	upgraded := runHorizon(t, demo, 25*time.Minute)
	t.Logf("Horizon: UPDATE_COMPLETE %.0fs after the upgrade's submit", upgraded.UpgradeSeconds)
	require.Equal(t, newVersion, upgraded.detail("COE Version"), "COE version after the upgrade")
	_, err = showCluster(t, cloudDemo, created.ClusterID)
	require.ErrorContains(t, err, "could not be found", "the cluster after its row went from Horizon's table")
	require.Eventually(t, func() bool { return capiObjects(t, created.ClusterID) == "" }, 2*time.Minute, 3*time.Second,
		"the management cluster still holds objects of the deleted cluster")
}
