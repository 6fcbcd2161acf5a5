package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The tenant API (docs/tenant-api.md): MagnumCluster objects a project's members apply in the
// project's namespace with the Keystone-token kubeconfig of the tenant view (tenantview_test.go),
// reconciled by the zed bridge through magnum-api with the application credential they give it.
// The tenants' steps run kubectl as they would; the waits read the objects with the admin client
// every 100 ms (a kubectl run per poll would cost more than the reaction it measures) and Magnum's
// rows through the database, as TestAutoscalerResizeShowsInMagnum does.

const (
	// mcResource is the MagnumClusters' resource as kubectl names it unambiguously.
	mcResource = v1alpha1.Resource + "." + v1alpha1.Group
	// The contract of docs/tenant-api.md, spelled out here rather than taken from the implementation.
	tenantAPIFinalizer   = "coe.magnum.openstack.org/magnum-cluster"
	credentialSecretType = "magnum.openstack.org/application-credential"
	// statusFollowsMagnum bounds how long after Magnum's row changes the object shows it: the status
	// is pushed when the bridge, Magnum's conductor, writes the row.
	statusFollowsMagnum = 2 * time.Second
)

// TestTenantAPIClusterObjects: demo's application credential in the typed Secret; a MagnumCluster
// applied with kubectl as demo becomes the Magnum cluster of its name (status.uuid is the uuid
// `coe cluster list` shows), and its status shows CREATE_COMPLETE and Ready within 2 s of Magnum's
// row; re-applying the same manifest changes nothing in Magnum; nodeCount 2 resizes it; a resize to 3
// with the CLI is reported in status.drift and taken back to 2; a kubectl delete holds the object
// (deletionTimestamp, finalizer) until Magnum's cluster is gone, then it goes too.
func TestTenantAPIClusterObjects(t *testing.T) {
	requireStack(t)
	t.Parallel()
	e := newTenantAPIEnv(t)
	ctx := context.Background()
	conf, err := config.Load(testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"))
	require.NoError(t, err)
	store := magnumStore(t, conf)
	tmpl := createTemplate(t, cloudDemo)
	tmplUUID := strings.TrimSpace(mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "show", tmpl, "-f", "value", "-c", "uuid"))
	hex := testutil.RandomHex(3)

	// 1. demo's application credential, handed over as a clouds.yaml in the typed Secret (tenants
	// write such Secrets and never read them: kubectl create, which needs no get). Unrestricted:
	// the create makes the cluster's own two credentials as the caller (docs/credentials.md), and
	// Keystone lets a restricted credential's token make none.
	var cred struct{ ID, Secret string }
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloudDemo, "application", "credential", "create", "e2e-tapi-"+hex,
		"--unrestricted", "-f", "json")), &cred))
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "application", "credential", "delete", cred.ID) })
	secret := "tapi-cred-" + hex
	clouds := filepath.Join(t.TempDir(), "clouds.yaml")
	require.NoError(t, os.WriteFile(clouds, cloudsYAMLOf(t, "openstack", cred.ID, cred.Secret), 0o600))
	out, err := tenantKubectl(e.demoKC, "create", "secret", "generic", secret, "-n", e.ns,
		"--type="+credentialSecretType, "--from-file=clouds.yaml="+clouds)
	require.NoError(t, err, "demo writes its credential Secret: %s", out)
	// Cleanups run last first: the object's (registered below) before the Secret's and the
	// credential's, which its finalizer needs.
	t.Cleanup(func() {
		_, _ = kubectl(t, mgmtKubeconfig, "delete", "secret", secret, "-n", e.ns, "--ignore-not-found")
	})

	// 2. Create.
	name := "tapi-" + hex
	e.removeAtEnd(name)
	spec := map[string]any{"credentialsRef": map[string]any{"name": secret}, "clusterTemplate": tmpl, "nodeCount": 1}
	manifest := e.file(e.object(name, spec))
	start := time.Now()
	out, err = tenantKubectl(e.demoKC, "apply", "-f", manifest)
	require.NoError(t, err, "demo applies a MagnumCluster: %s", out)
	o := e.waitObject(name, 2*time.Minute, "status.uuid", func(o *v1alpha1.MagnumCluster) bool { return o.Status.UUID != "" })
	timed(t, "tenant API: apply → status.uuid", start)
	uuid := o.Status.UUID
	require.Contains(t, o.Finalizers, tenantAPIFinalizer)
	listed, ok := magnumClusters(t, cloudDemo)[name]
	require.True(t, ok, "no cluster %s in demo's `openstack coe cluster list`", name)
	require.Equal(t, uuid, listed.UUID, "status.uuid is the uuid of the Magnum cluster of the object's name")

	magnumAt, lag := e.follow(store, name, uuid, 6*time.Minute, "CREATE_COMPLETE and Ready",
		func(c *db.Cluster, _ []*db.NodeGroup) bool { return c.Status == magnum.StatusCreateComplete },
		func(o *v1alpha1.MagnumCluster) bool { return o.Status.Status == "CREATE_COMPLETE" && isReady(o) })
	t.Logf("TIMING %-40s %6.1fs", "tenant API: apply → Magnum CREATE_COMPLETE", magnumAt.Sub(start).Seconds())
	t.Logf("TIMING tenant API: Magnum's row CREATE_COMPLETE → the object's status CREATE_COMPLETE and Ready: %s (row polled every 50 ms, object every 100 ms)",
		lag.Round(time.Millisecond))
	require.LessOrEqual(t, lag, statusFollowsMagnum, "the object's status lags Magnum")

	// What the CLI shows is what the object shows.
	c, err := cliShowCluster(t, cloudDemo, uuid)
	require.NoError(t, err)
	require.Equal(t, "CREATE_COMPLETE", c.Status)
	o, err = e.get(name)
	require.NoError(t, err)
	require.Equal(t, c.UUID, o.Status.UUID)
	require.Equal(t, c.APIAddress, o.Status.APIAddress)
	require.True(t, strings.HasPrefix(o.Status.APIAddress, "https://"), o.Status.APIAddress)
	require.Equal(t, c.COEVersion, o.Status.COEVersion)
	require.EqualValues(t, c.MasterCount, o.Status.MasterCount)
	require.EqualValues(t, 1, o.Status.NodeCount)
	require.EqualValues(t, c.NodeCount, o.Status.NodeCount)
	require.Equal(t, tmplUUID, o.Status.ClusterTemplateID)
	require.Empty(t, o.Status.Drift)
	require.Equal(t, o.Generation, o.Status.ObservedGeneration)
	require.Equal(t, "CREATE_COMPLETE", readyOf(o).Reason, "Ready's reason is Magnum's status")
	var ngs []*db.NodeGroup
	o = e.waitObject(name, 30*time.Second, "status.nodeGroups as Magnum's rows (default-master and default-worker, not owned)", func(o *v1alpha1.MagnumCluster) bool {
		ngs, err = store.ListNodeGroups(ctx, uuid)
		return err == nil && reflect.DeepEqual(nodeGroupsOfRows(ngs), nodeGroupsOf(o))
	})
	require.Contains(t, nodeGroupsOf(o), "default-master")
	require.Contains(t, nodeGroupsOf(o), "default-worker")
	e.waitObject(name, 30*time.Second, "healthStatus as in Magnum", func(o *v1alpha1.MagnumCluster) bool {
		row, err := store.GetCluster(ctx, uuid)
		return err == nil && o.Status.HealthStatus != "" && o.Status.HealthStatus == string(row.HealthStatus)
	})
	out, err = tenantKubectl(e.demoKC, "get", "mc", name, "-n", e.ns) // the short name and the printer columns
	require.NoError(t, err, out)
	require.Contains(t, out, "CREATE_COMPLETE")
	t.Logf("as demo, kubectl get mc -n %s:\n%s", e.ns, out)
	logs, err := os.ReadFile(bridgeLog)
	require.NoError(t, err)
	require.NotContains(t, string(logs), cred.Secret, "the application credential's secret is in the bridge's log")

	// 3. The same manifest again (client-side apply, then server-side as GitOps tools do): no new
	// generation, no Magnum action.
	before, err := e.get(name)
	require.NoError(t, err)
	row, err := store.GetCluster(ctx, uuid)
	require.NoError(t, err)
	out, err = tenantKubectl(e.demoKC, "apply", "-f", manifest)
	require.NoError(t, err, out)
	require.Contains(t, out, "unchanged")
	out, err = tenantKubectl(e.demoKC, "apply", "--server-side", "-f", manifest)
	require.NoError(t, err, out)
	for steady := time.Now().Add(5 * time.Second); time.Now().Before(steady); time.Sleep(100 * time.Millisecond) {
		now, err := e.get(name)
		require.NoError(t, err)
		require.Equal(t, before.Generation, now.Generation, "re-applying the same manifest made a new generation")
		r, err := store.GetCluster(ctx, uuid)
		require.NoError(t, err)
		require.Equal(t, row.Status, r.Status, "a Magnum action after re-applying the same manifest")
		require.Equal(t, row.UpdatedAt, r.UpdatedAt, "Magnum's row written after re-applying the same manifest")
	}

	// 4. nodeCount 2.
	spec["nodeCount"] = 2
	start = time.Now()
	out, err = tenantKubectl(e.demoKC, "apply", "-f", e.file(e.object(name, spec)))
	require.NoError(t, err, out)
	magnumAt, lag = e.follow(store, name, uuid, 6*time.Minute, "UPDATE_COMPLETE with 2 nodes and Ready",
		func(c *db.Cluster, ngs []*db.NodeGroup) bool {
			return c.Status == magnum.StatusUpdateComplete && defaultWorkerCount(ngs) == 2
		},
		func(o *v1alpha1.MagnumCluster) bool {
			return o.Status.Status == "UPDATE_COMPLETE" && o.Status.NodeCount == 2 && isReady(o)
		})
	t.Logf("TIMING %-40s %6.1fs", "tenant API: nodeCount 2 → Magnum UPDATE_COMPLETE", magnumAt.Sub(start).Seconds())
	t.Logf("TIMING tenant API: Magnum's row UPDATE_COMPLETE → the object's status UPDATE_COMPLETE and Ready: %s (row polled every 50 ms, object every 100 ms)",
		lag.Round(time.Millisecond))
	c = waitNodeCount(t, cloudDemo, uuid, time.Minute, 2)
	require.Equal(t, "UPDATE_COMPLETE", c.Status)
	require.Eventually(t, func() bool { return len(workerMachines(t, c.StackID)) == 2 }, time.Minute, time.Second,
		"2 worker Machines of %s in the management cluster", c.StackID)
	o, err = e.get(name)
	require.NoError(t, err)
	require.Greater(t, o.Generation, before.Generation)
	require.Equal(t, "UPDATE_COMPLETE", readyOf(o).Reason)
	require.Empty(t, o.Status.Drift)

	// 5. A resize to 3 with the CLI, behind the object's back: reported in status.drift, never with
	// Ready True, and taken back to the spec's 2. The CLI runs while the row is polled: the bridge
	// may be quick.
	const wantDrift = "nodeCount: 3 in Magnum, 2 in the spec"
	resize := make(chan error, 1)
	start = time.Now()
	go func() {
		_, err := runCLI(cloudDemo, "coe", "cluster", "resize", name, "3")
		resize <- err
	}()
	var (
		resized                      bool
		sawThree, driftAt, backToTwo time.Time
		driftPolls                   int
	)
	deadline := time.Now().Add(8 * time.Minute)
	for {
		require.True(t, time.Now().Before(deadline), "cluster %s: not back to 2 nodes, UPDATE_COMPLETE and Ready within 8 minutes of the CLI's resize to 3 "+
			"(saw 3: %v, drift reported: %v, back to 2: %v)", uuid, !sawThree.IsZero(), !driftAt.IsZero(), !backToTwo.IsZero())
		if !resized {
			select {
			case err := <-resize:
				require.NoError(t, err)
				resized = true
			default:
			}
		}
		row, err := store.GetCluster(ctx, uuid)
		require.NoError(t, err)
		require.False(t, strings.HasSuffix(string(row.Status), "_FAILED"), "cluster %s: %s", uuid, row.Status)
		ngs, err := store.ListNodeGroups(ctx, uuid)
		require.NoError(t, err)
		workers := defaultWorkerCount(ngs)
		now := time.Now()
		if workers == 3 && sawThree.IsZero() {
			sawThree = now
		}
		if workers == 2 && !sawThree.IsZero() && backToTwo.IsZero() {
			backToTwo = now
		}
		o, err := e.get(name)
		require.NoError(t, err)
		if slices.Contains(o.Status.Drift, wantDrift) {
			if driftAt.IsZero() {
				driftAt = now
			}
			driftPolls++
			require.NotEqual(t, metav1.ConditionTrue, readyOf(o).Status, "Ready while status.drift says %v", o.Status.Drift)
		}
		if resized && !backToTwo.IsZero() && workers == 2 && row.Status == magnum.StatusUpdateComplete &&
			o.Status.Status == "UPDATE_COMPLETE" && o.Status.NodeCount == 2 && len(o.Status.Drift) == 0 && isReady(o) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.False(t, driftAt.IsZero(), "status.drift never said %q", wantDrift)
	t.Logf("TIMING %-40s %6.1fs (the CLI's own start included)", "tenant API: CLI resize 3 → Magnum node_count 3", sawThree.Sub(start).Seconds())
	t.Logf("TIMING tenant API: Magnum node_count 3 → status.drift reports it: %s (seen in %d polls of 100 ms)",
		driftAt.Sub(sawThree).Round(time.Millisecond), driftPolls)
	t.Logf("TIMING %-40s %6.1fs", "tenant API: Magnum node_count 3 → back to 2", backToTwo.Sub(sawThree).Seconds())
	timed(t, "tenant API: CLI resize 3 → back to 2, Ready", start)
	c = waitNodeCount(t, cloudDemo, uuid, time.Minute, 2)
	require.Equal(t, "UPDATE_COMPLETE", c.Status)

	// 6. Delete: the object stays, deleting, until Magnum's cluster is gone.
	start = time.Now()
	out, err = tenantKubectl(e.demoKC, "delete", "mc", name, "-n", e.ns, "--wait=false")
	require.NoError(t, err, out)
	o, err = e.get(name)
	require.NoError(t, err, "the object went at once, before Magnum's cluster")
	require.NotNil(t, o.DeletionTimestamp)
	require.Contains(t, o.Finalizers, tenantAPIFinalizer)
	var (
		deleting               bool
		magnumGone, objectGone time.Time
	)
	deadline = time.Now().Add(5 * time.Minute)
	for objectGone.IsZero() {
		require.True(t, time.Now().Before(deadline), "MagnumCluster %s/%s still there 5 minutes after its delete (Magnum's cluster gone: %v)",
			e.ns, name, !magnumGone.IsZero())
		// The object first, then the row: an object gone while the row read after it is still
		// there went before Magnum's cluster.
		o, oerr := e.get(name)
		_, derr := store.GetCluster(ctx, uuid)
		switch {
		case derr == nil:
		case errors.Is(derr, magnum.ErrClusterNotFound):
			if magnumGone.IsZero() {
				magnumGone = time.Now()
			}
		default:
			require.NoError(t, derr)
		}
		switch {
		case apierrors.IsNotFound(oerr):
			require.False(t, magnumGone.IsZero(), "the object went while Magnum still had cluster %s", uuid)
			objectGone = time.Now()
			continue
		case oerr != nil:
			require.NoError(t, oerr)
		}
		require.NotNil(t, o.DeletionTimestamp)
		require.Contains(t, o.Finalizers, tenantAPIFinalizer)
		if o.Status.Status == "DELETE_IN_PROGRESS" {
			deleting = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.True(t, deleting, "the deleting object never showed Magnum's DELETE_IN_PROGRESS")
	t.Logf("TIMING %-40s %6.1fs", "tenant API: kubectl delete → Magnum cluster gone", magnumGone.Sub(start).Seconds())
	t.Logf("TIMING tenant API: Magnum cluster gone → object gone: %s (polled every 100 ms)", objectGone.Sub(magnumGone).Round(time.Millisecond))
	waitGone(t, cloudDemo, uuid, time.Minute)
	_, ok = magnumClusters(t, cloudDemo)[name]
	require.False(t, ok, "cluster %s still in `openstack coe cluster list`", name)
	require.Empty(t, capiObjects(t, uuid), "management cluster still holds objects of the deleted cluster")
}

// TestTenantAPIAccessAndValidation: who may do what with MagnumClusters and their Secrets (alt_demo
// nothing in demo's namespace; a reader of demo's project reads and writes nothing; demo writes but
// never reads its credential Secrets, and no other type), what admission refuses (schema and the
// bridge's webhook, each naming the field), and an object whose credential Keystone refuses or that
// names no Secret: Ready False with the reason, no Magnum cluster, and a delete the finalizer does not
// hold up. No cluster is created.
func TestTenantAPIAccessAndValidation(t *testing.T) {
	requireStack(t)
	t.Parallel()
	e := newTenantAPIEnv(t)
	tmpl := createTemplate(t, cloudDemo)
	hex := testutil.RandomHex(3)
	probeName := "tapi-probe-" + hex
	probe := e.file(e.object(probeName, map[string]any{"credentialsRef": map[string]any{"name": "tapi-none-" + hex}, "clusterTemplate": tmpl}))

	// alt_demo: nothing in demo's namespace.
	altKC := execKubeconfig(t, cloudAlt)
	out, err := tenantKubectl(altKC, "get", mcResource, "-n", e.ns)
	requireForbidden(t, "alt_demo listing demo's MagnumClusters", out, err)
	out, err = tenantKubectl(altKC, "get", mcResource, probeName, "-n", e.ns)
	requireForbidden(t, "alt_demo getting a MagnumCluster in demo's namespace", out, err)
	out, err = tenantKubectl(altKC, "create", "-f", probe, "--dry-run=server")
	requireForbidden(t, "alt_demo creating a MagnumCluster in demo's namespace", out, err)

	// A user with Keystone's reader role on demo's project: reads, writes nothing.
	password := testutil.RandomHex(16)
	var reader struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloudAdmin, "user", "create", "e2e-tapi-reader-"+hex,
		"--domain", "Default", "--password", password, "-f", "json")), &reader))
	t.Cleanup(func() { _, _ = openstack(t, cloudAdmin, "user", "delete", reader.ID) })
	mustOpenstack(t, cloudAdmin, "role", "add", "--user", reader.ID, "--project", e.projectID, "reader")
	readerKC := tokenKubeconfig(t, testutil.KeystoneToken(context.Background(), t, gophercloud.AuthOptions{IdentityEndpoint: keystoneURL,
		UserID: reader.ID, Password: password, Scope: &gophercloud.AuthScope{ProjectID: e.projectID}}))
	out, err = tenantKubectl(readerKC, "get", mcResource, "-n", e.ns)
	require.NoError(t, err, "a reader of demo's project lists its MagnumClusters: %s", out)
	out, err = tenantKubectl(readerKC, "create", "-f", probe, "--dry-run=server")
	requireForbidden(t, "a reader creating a MagnumCluster", out, err)
	out, err = tenantKubectl(readerKC, "create", "secret", "generic", "tapi-reader-"+hex, "-n", e.ns,
		"--type="+credentialSecretType, "--from-literal=clouds.yaml=x", "--dry-run=server")
	requireForbidden(t, "a reader creating a credential Secret", out, err)

	// demo: credential Secrets are write-only, and the only type it may write.
	out, err = tenantKubectl(e.demoKC, "get", "secrets", "-n", e.ns)
	requireForbidden(t, "demo listing Secrets", out, err)
	out, err = tenantKubectl(e.demoKC, "create", "secret", "generic", "tapi-opaque-"+hex, "-n", e.ns, "--from-literal=a=b", "--dry-run=server")
	requireForbidden(t, "demo creating an Opaque Secret (admission policy)", out, err)
	require.Contains(t, out, credentialSecretType, "the refusal says which type is allowed")
	// A credential Keystone does not know, written with a server-side apply (patch and create only:
	// no get, which tenants do not have on Secrets).
	bogus := "tapi-bogus-" + hex
	bogusSecret := testutil.RandomHex(24)
	out, err = tenantKubectl(e.demoKC, "apply", "--server-side", "-f", e.file(map[string]any{"apiVersion": "v1", "kind": "Secret",
		"type": credentialSecretType, "metadata": map[string]any{"name": bogus, "namespace": e.ns},
		"stringData": map[string]any{"clouds.yaml": string(cloudsYAMLOf(t, "bogus", testutil.RandomHex(16), bogusSecret))}}))
	require.NoError(t, err, "demo writes a credential Secret with a server-side apply: %s", out)
	t.Cleanup(func() { _, _ = kubectl(t, mgmtKubeconfig, "delete", "secret", bogus, "-n", e.ns, "--ignore-not-found") })
	out, err = tenantKubectl(e.demoKC, "get", "secret", bogus, "-n", e.ns)
	requireForbidden(t, "demo reading back its credential Secret", out, err)

	// Admission: the schema and the bridge's webhook refuse, naming the field.
	base := func() map[string]any {
		return map[string]any{"credentialsRef": map[string]any{"name": bogus, "cloudName": "bogus"}, "clusterTemplate": tmpl, "nodeCount": 1}
	}
	with := func(k string, v any) map[string]any { s := base(); s[k] = v; return s }
	unknown := "e2e-no-such-template-" + hex
	for _, tc := range []struct {
		what string
		spec map[string]any
		want []string
	}{
		{"nodeCount -1 (schema)", with("nodeCount", -1), []string{"spec.nodeCount"}},
		{"an unknown cluster template (webhook)", with("clusterTemplate", unknown), []string{"spec.clusterTemplate", unknown}},
		{"an unknown label (webhook)", with("labels", map[string]any{"not_a_label_xyz": "1"}), []string{"spec.labels", "not_a_label_xyz"}},
		{"an invalid label value (webhook)", with("labels", map[string]any{"auto_scaling_enabled": "maybe"}), []string{"spec.labels", "auto_scaling_enabled"}},
	} {
		name := "tapi-bad-" + testutil.RandomHex(3)
		e.removeAtEnd(name) // should it be accepted after all
		out, err := tenantKubectl(e.demoKC, "apply", "-f", e.file(e.object(name, tc.spec)))
		require.Error(t, err, "%s was accepted: %s", tc.what, out)
		for _, w := range tc.want {
			require.Contains(t, out, w, "refusing %s", tc.what)
		}
		t.Logf("%s refused: %s", tc.what, strings.TrimSpace(out))
		_, err = e.get(name)
		require.True(t, apierrors.IsNotFound(err), "%s: the object was stored (%v)", tc.what, err)
	}

	// A credential Keystone refuses, and one that is not there: Ready False with the reason, no
	// Magnum cluster.
	rejected, missing := "tapi-rej-"+hex, "tapi-miss-"+hex
	e.removeAtEnd(rejected)
	e.removeAtEnd(missing)
	rejSpec := with("masterCount", 1)
	start := time.Now()
	out, err = tenantKubectl(e.demoKC, "apply", "-f", e.file(e.object(rejected, rejSpec)))
	require.NoError(t, err, out)
	out, err = tenantKubectl(e.demoKC, "apply", "-f", e.file(e.object(missing,
		map[string]any{"credentialsRef": map[string]any{"name": "tapi-none-" + hex}, "clusterTemplate": tmpl})))
	require.NoError(t, err, out)
	o := e.waitObject(rejected, 2*time.Minute, "Ready False, CredentialRejected", func(o *v1alpha1.MagnumCluster) bool {
		r := readyOf(o)
		return r.Status == metav1.ConditionFalse && r.Reason == "CredentialRejected"
	})
	timed(t, "tenant API: apply → CredentialRejected", start)
	msg := readyOf(o).Message
	t.Logf("CredentialRejected: %s", msg)
	require.Contains(t, msg, "Keystone", "the message carries Keystone's refusal")
	require.NotContains(t, msg, bogusSecret, "the message shows the credential's secret")
	require.Empty(t, o.Status.UUID)
	logs, err := os.ReadFile(bridgeLog)
	require.NoError(t, err)
	require.NotContains(t, string(logs), bogusSecret, "the refused credential's secret is in the bridge's log")
	o = e.waitObject(missing, time.Minute, "Ready False, CredentialMissing", func(o *v1alpha1.MagnumCluster) bool {
		r := readyOf(o)
		return r.Status == metav1.ConditionFalse && r.Reason == "CredentialMissing"
	})
	require.Contains(t, readyOf(o).Message, "tapi-none-"+hex, "CredentialMissing names the Secret")
	listed := magnumClusters(t, cloudDemo)
	for _, n := range []string{rejected, missing} {
		_, ok := listed[n]
		require.False(t, ok, "a Magnum cluster %s without a working credential", n)
	}

	// Fields Magnum cannot change are immutable (the schema), and the status is the bridge's.
	rejSpec["masterCount"] = 3
	out, err = tenantKubectl(e.demoKC, "apply", "-f", e.file(e.object(rejected, rejSpec)))
	require.Error(t, err, "masterCount changed: %s", out)
	require.Contains(t, out, "masterCount cannot change")
	out, err = tenantKubectl(e.demoKC, "patch", mcResource, rejected, "-n", e.ns, "--subresource=status", "--type=merge",
		"-p", `{"status":{"status":"CREATE_COMPLETE"}}`)
	requireForbidden(t, "demo writing a MagnumCluster's status", out, err)

	// Deleted, with nothing created in Magnum: the finalizer does not hold them.
	start = time.Now()
	out, err = tenantKubectl(e.demoKC, "delete", mcResource, rejected, missing, "-n", e.ns, "--wait=false")
	require.NoError(t, err, out)
	for _, n := range []string{rejected, missing} {
		e.waitObjectGone(n, time.Minute)
	}
	timed(t, "tenant API: delete of objects without a cluster", start)
	out, err = tenantKubectl(e.demoKC, "delete", "secret", bogus, "-n", e.ns)
	require.NoError(t, err, "demo deletes its credential Secret: %s", out)
}

// tenantAPIEnv is demo's side of the tenant API: its project namespace, its Keystone-token
// kubeconfig (docs/tenant-view.md), and the admin client the waits read the objects with.
type tenantAPIEnv struct {
	t         *testing.T
	projectID string
	ns        string
	demoKC    string
	kube      client.Client
}

func newTenantAPIEnv(t *testing.T) *tenantAPIEnv {
	t.Helper()
	tok := tokenOf(t, cloudDemo)
	ns := templates.NamespaceFor(zedPrefix, tok.ProjectID)
	demoKC := execKubeconfig(t, cloudDemo)
	// With the tenant API the bridge makes the project's namespace, with the editor role's binding, at
	// the project's first Keystone login: this can-i is one, so no cluster create is needed first.
	require.Eventually(t, func() bool {
		_, err := tenantKubectl(demoKC, "auth", "can-i", "create", mcResource, "-n", ns)
		return err == nil // exit status 0: yes
	}, 2*time.Minute, 2*time.Second, "demo may not create MagnumClusters in %s", ns)
	_, cfg := testutil.ManagementCluster(t)
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return &tenantAPIEnv{t: t, projectID: tok.ProjectID, ns: ns, demoKC: demoKC, kube: kube}
}

// object is a MagnumCluster manifest in demo's namespace, as a tenant writes it.
func (e *tenantAPIEnv) object(name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": name, "namespace": e.ns}, "spec": spec}
}

// file writes obj as YAML for kubectl -f.
func (e *tenantAPIEnv) file(obj any) string {
	e.t.Helper()
	b, err := yaml.Marshal(obj)
	require.NoError(e.t, err)
	path := filepath.Join(e.t.TempDir(), "manifest.yaml")
	require.NoError(e.t, os.WriteFile(path, b, 0o600))
	return path
}

func (e *tenantAPIEnv) get(name string) (*v1alpha1.MagnumCluster, error) {
	var o v1alpha1.MagnumCluster
	if err := e.kube.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// waitObject polls the object every 100 ms until ok says so.
func (e *tenantAPIEnv) waitObject(name string, timeout time.Duration, what string, ok func(*v1alpha1.MagnumCluster) bool) *v1alpha1.MagnumCluster {
	e.t.Helper()
	var (
		last *v1alpha1.MagnumCluster
		err  error
	)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var o *v1alpha1.MagnumCluster
		if o, err = e.get(name); err == nil {
			last = o
			if ok(o) {
				return o
			}
		}
	}
	e.t.Fatalf("MagnumCluster %s/%s: %s: not within %s (last error: %v); last seen: %s", e.ns, name, what, timeout, err, describeObject(last))
	return nil
}

func (e *tenantAPIEnv) waitObjectGone(name string, timeout time.Duration) {
	e.t.Helper()
	var last *v1alpha1.MagnumCluster
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		o, err := e.get(name)
		if apierrors.IsNotFound(err) {
			return
		}
		require.NoError(e.t, err)
		last = o
	}
	e.t.Fatalf("MagnumCluster %s/%s still there %s after its delete: %s", e.ns, name, timeout, describeObject(last))
}

// follow polls the Magnum cluster's rows every 50 ms until inMagnum holds, then the object every
// 100 ms until inObject does: when the poll first saw Magnum's rows so (up to a poll after the
// write), and how long the object took after that. A *_FAILED status in Magnum fails the test.
func (e *tenantAPIEnv) follow(store *db.Store, name, uuid string, timeout time.Duration, what string,
	inMagnum func(*db.Cluster, []*db.NodeGroup) bool, inObject func(*v1alpha1.MagnumCluster) bool) (magnumAt time.Time, lag time.Duration) {
	e.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		row, err := store.GetCluster(ctx, uuid)
		require.NoError(e.t, err)
		ngs, err := store.ListNodeGroups(ctx, uuid)
		require.NoError(e.t, err)
		if inMagnum(row, ngs) {
			magnumAt = time.Now()
			break
		}
		require.False(e.t, strings.HasSuffix(string(row.Status), "_FAILED"), "cluster %s: %s", uuid, describeRow(row))
		require.True(e.t, time.Now().Before(deadline), "cluster %s: Magnum not %s within %s; last: %s", uuid, what, timeout, describeRow(row))
		time.Sleep(50 * time.Millisecond)
	}
	// Waits past the bound, so that a slow push is measured rather than only refused.
	e.waitObject(name, statusFollowsMagnum+time.Minute, what, inObject)
	return magnumAt, time.Since(magnumAt)
}

// removeAtEnd deletes the object when the test ends, whatever happened: through its finalizer (the
// bridge deletes the Magnum cluster, if any); failing that, the Magnum cluster with the CLI and the
// finalizer by hand.
func (e *tenantAPIEnv) removeAtEnd(name string) {
	t := e.t
	t.Cleanup(func() {
		_, _ = kubectl(t, mgmtKubeconfig, "delete", mcResource, name, "-n", e.ns, "--ignore-not-found", "--wait=false")
		gone := func() bool { _, err := e.get(name); return apierrors.IsNotFound(err) }
		for deadline := time.Now().Add(4 * time.Minute); !gone() && time.Now().Before(deadline); {
			time.Sleep(2 * time.Second)
		}
		if gone() {
			return
		}
		t.Logf("MagnumCluster %s/%s still there 4 minutes after its delete: deleting its Magnum cluster with the CLI, releasing the finalizer", e.ns, name)
		if c, ok := magnumClusters(t, cloudDemo)[name]; ok {
			_, _ = openstack(t, cloudDemo, "coe", "cluster", "delete", c.UUID)
			waitGone(t, cloudDemo, c.UUID, 4*time.Minute)
		}
		_, _ = kubectl(t, mgmtKubeconfig, "patch", mcResource, name, "-n", e.ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	})
}

// cloudsYAMLOf is the clouds.yaml of an application credential, as Horizon's download writes it.
func cloudsYAMLOf(t *testing.T, cloud, id, secret string) []byte {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"clouds": map[string]any{cloud: map[string]any{
		"auth_type": "v3applicationcredential", "region_name": "RegionOne", "identity_api_version": 3,
		"auth": map[string]any{"auth_url": keystoneURL, "application_credential_id": id, "application_credential_secret": secret}}}})
	require.NoError(t, err)
	return b
}

type listedCluster struct{ UUID, Status string }

// magnumClusters is the cloud's `openstack coe cluster list`, by name.
func magnumClusters(t *testing.T, cloud string) map[string]listedCluster {
	t.Helper()
	var list []struct{ UUID, Name, Status string }
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloud, "coe", "cluster", "list", "-f", "json")), &list))
	out := map[string]listedCluster{}
	for _, c := range list {
		out[c.Name] = listedCluster{UUID: c.UUID, Status: c.Status}
	}
	return out
}

// readyOf is the object's Ready condition (the zero condition when it has none yet).
func readyOf(o *v1alpha1.MagnumCluster) metav1.Condition {
	if c := meta.FindStatusCondition(o.Status.Conditions, "Ready"); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// isReady: Ready True for the object's current spec.
func isReady(o *v1alpha1.MagnumCluster) bool {
	return readyOf(o).Status == metav1.ConditionTrue && o.Status.ObservedGeneration == o.Generation
}

func defaultWorkerCount(ngs []*db.NodeGroup) int64 {
	for _, g := range ngs {
		if g.Name == "default-worker" && g.NodeCount != nil {
			return *g.NodeCount
		}
	}
	return -1
}

func nodeGroupsOf(o *v1alpha1.MagnumCluster) map[string]v1alpha1.NodeGroupStatus {
	out := map[string]v1alpha1.NodeGroupStatus{}
	for _, g := range o.Status.NodeGroups {
		out[g.Name] = g
	}
	return out
}

// nodeGroupsOfRows is what status.nodeGroups should say of Magnum's rows, none of them owned.
func nodeGroupsOfRows(ngs []*db.NodeGroup) map[string]v1alpha1.NodeGroupStatus {
	out := map[string]v1alpha1.NodeGroupStatus{}
	for _, g := range ngs {
		s := v1alpha1.NodeGroupStatus{Name: g.Name, UUID: g.UUID, Status: string(g.Status)}
		if g.Role != nil {
			s.Role = *g.Role
		}
		if g.NodeCount != nil {
			s.NodeCount = int32(*g.NodeCount)
		}
		out[g.Name] = s
	}
	return out
}

func describeObject(o *v1alpha1.MagnumCluster) string {
	if o == nil {
		return "nothing"
	}
	b, _ := json.Marshal(map[string]any{"generation": o.Generation, "deletionTimestamp": o.DeletionTimestamp,
		"finalizers": o.Finalizers, "status": o.Status})
	return string(b)
}

func describeRow(c *db.Cluster) string {
	if c == nil {
		return "nothing"
	}
	reason := ""
	if c.StatusReason != nil {
		reason = *c.StatusReason
	}
	return string(c.Status) + ": " + reason
}
