package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// A Kubernetes version the image cannot run, or the bridge does not support, and a label value
// invalid for its type, are refused before anything is built: the create is CREATE_FAILED within
// seconds, naming what to fix; an upgrade to such a template is refused and changes nothing.

// waitRefused polls a create that the bridge must refuse in its handler: CREATE_FAILED within 10 s.
func waitRefused(t *testing.T, cloud, id string) *clusterShow {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := showCluster(t, cloud, id)
		require.NoError(t, err)
		if c.Status != "CREATE_IN_PROGRESS" || time.Now().After(deadline) {
			require.Equal(t, "CREATE_FAILED", c.Status, "refused within 10 s: %s", c.StatusReason)
			return c
		}
		time.Sleep(time.Second)
	}
}

// TestRefusedBeforeAnythingIsBuilt: on the v1.36.3 image (Glance property kube_version=v1.36.3 in
// the fake's seed), kube_tag v1.99.0 (no such Kubernetes, outside the range) and v1.35.4 (older than
// the image) fail at once naming kube_tag, the image's version and the supported range; and
// master_lb_floating_ip_enabled, which means nothing to the in-memory machines, fails naming the label
// for "maybe", no boolean whatever the flavor does with it. Nothing reaches the management cluster.
func TestRefusedBeforeAnythingIsBuilt(t *testing.T) {
	requireStack(t)
	t.Parallel()
	supported := addons.SupportedKubernetesVersions().String()
	tmpl := createTemplate(t, cloudDemo) // ubuntu-2404-kube-v1.36.3
	cases := []struct {
		label string
		want  []string
	}{
		{"kube_tag=v1.99.0", []string{"kube_tag", "v1.99.0", "v1.36.3", supported}},
		{"kube_tag=v1.35.4", []string{"kube_tag", "v1.35.4", "v1.36.3", supported}},
		{"master_lb_floating_ip_enabled=maybe", []string{`invalid value "maybe" for label master_lb_floating_ip_enabled`}},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = createCluster(t, cloudDemo, tmpl, "refused-"+testutil.RandomHex(3), "--node-count", "1", "--labels", c.label)
	}
	for i, id := range ids {
		c := waitRefused(t, cloudDemo, id)
		for _, want := range cases[i].want {
			require.Contains(t, c.StatusReason, want, cases[i].label)
		}
		require.NotContains(t, c.StatusReason, "not implemented", cases[i].label)
		require.Empty(t, capiObjects(t, id), "no CAPI Cluster nor secrets of a refused create (%s)", cases[i].label)
		mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	}
	for _, id := range ids {
		waitGone(t, cloudDemo, id, 2*time.Minute)
	}
}

// TestKubeTagOfTheImageIsBuiltAndAnUpgradeItCannotRunIsRefused: kube_tag equal to the image's
// version is built; an upgrade to a template whose image (v1.35.4) cannot run its kube_tag
// (v1.36.3) is refused by the call, and the cluster stays CREATE_COMPLETE on its template and
// version, with nothing changed in the management cluster.
func TestKubeTagOfTheImageIsBuiltAndAnUpgradeItCannotRunIsRefused(t *testing.T) {
	requireStack(t)
	t.Parallel()
	tmpl := createTemplate(t, cloudDemo, "--labels", "kube_tag=v1.36.3")
	mismatched := createTemplateWithImage(t, cloudDemo, "ubuntu-2404-kube-v1.35.4", "--labels", "kube_tag=v1.36.3")
	id := createCluster(t, cloudDemo, tmpl, "goodtag-"+testutil.RandomHex(3), "--node-count", "1")
	c := waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")
	require.Equal(t, "v1.36.3", c.COEVersion)
	before := capiTopology(t, id)

	_, err := openstack(t, cloudDemo, "coe", "cluster", "upgrade", id, mismatched)
	require.Error(t, err)
	// magnum-api's error title is the message up to its first full stop.
	require.Contains(t, err.Error(), "kube_tag does not match the Kubernetes version of the image")

	c, err = showCluster(t, cloudDemo, id)
	require.NoError(t, err)
	require.Equal(t, "CREATE_COMPLETE", c.Status, c.StatusReason)
	require.Equal(t, "v1.36.3", c.COEVersion)
	show := mustOpenstack(t, cloudDemo, "coe", "cluster", "show", id, "-c", "cluster_template_id", "-f", "value")
	require.Equal(t, templateID(t, tmpl), strings.TrimSpace(show), "still on its template")
	require.Equal(t, before, capiTopology(t, id), "the CAPI Cluster's class and version are unchanged")
}

// capiTopology is the CAPI Cluster's class and version, and its template label.
func capiTopology(t *testing.T, uuid string) string {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "get", "clusters.cluster.x-k8s.io", "-A", "-l", "magnum.openstack.org/cluster-uuid="+uuid,
		"-o", `jsonpath={.items[0].spec.topology.classRef.name} {.items[0].spec.topology.version} {.items[0].metadata.labels.magnum\.openstack\.org/cluster-template-uuid}`)
	require.NoError(t, err, out)
	require.Len(t, strings.Fields(out), 3, out)
	return out
}

func templateID(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "show", name, "-c", "uuid", "-f", "value"))
}
