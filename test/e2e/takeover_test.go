package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestAdoptAMagnumClusterAPICluster: a cluster vexxhost's magnum-cluster-api built — Magnum's rows
// (stack_id kube-xxxxx, its CAs in Magnum's certificate store) and, in the namespace magnum-system,
// what that driver makes: its ClusterClass magnum-v0.38.1, the Cluster under it, the credential
// Secret (clouds.yaml cloud "default", a real application credential of the tenant), the four CA
// Secrets, two ClusterResourceSets with their Secrets — is taken over in place:
//   - before: every call about it is refused naming magnum-cluster-api; the plan refuses it until
//     the operator hands magnum-system over, then says adopt (and what stays refused);
//   - `adoption run` marks it; no Machine is replaced; the status sync fills in its address,
//     version and health and follows a change made outside Magnum (its workers scaled);
//   - `coe cluster config` signs with its CA and lists its nodes;
//   - an upgrade is refused with NotSupported naming the driver, a resize changes nothing;
//   - a delete removes it, and nothing of it is left: objects, Secrets, resource sets,
//     application credential, certificates.
//
// The management cluster's objects are a stand-in for the driver (Python, not installable here),
// made with its names and labels, on the in-memory infrastructure.
func TestAdoptAMagnumClusterAPICluster(t *testing.T) {
	requireStack(t)
	t.Parallel()
	ctx := context.Background()
	magnumConf := testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf")
	conf, err := config.Load(magnumConf)
	require.NoError(t, err)
	store := magnumStore(t, conf)
	tok := demoToken(t)
	tmplUUID := strings.TrimSpace(mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "show", createTemplate(t, cloudDemo), "-f", "value", "-c", "uuid"))
	vexx := standInClusterAPICluster(t, store, tok, tmplUUID)
	id, stack, ns := vexx.id, vexx.stack, templates.ClusterAPINamespace
	logPath := filepath.Join(logDir, "bridge.log")

	// Not taken over: refused, naming its driver.
	_, err = openstack(t, cloudDemo, "coe", "cluster", "config", id, "--dir", t.TempDir())
	require.Error(t, err)
	require.Contains(t, err.Error(), "was built by the magnum-cluster-api driver")
	require.Contains(t, err.Error(), "adoption plan")

	bin := filepath.Join(repoRoot(t), "bin/magnum-capi-bridge")
	base := []string{"--config-file", magnumConf, "--config-file", filepath.Join(testutil.Env("MCB_ETC_DIR", "/etc/magnum-capi-bridge"), "bridge.conf")}
	plan := func() adoption.Entry {
		var entries []adoption.Entry
		require.NoError(t, json.Unmarshal([]byte(commandOutput(t, repoRoot(t), bin, append(base, "adoption", "plan", "--json")...)), &entries))
		for _, e := range entries {
			if e.UUID == id {
				return e
			}
		}
		t.Fatalf("cluster %s is not in the plan", id)
		return adoption.Entry{}
	}
	e := plan()
	require.Equal(t, adoption.Refuse, e.Action, "%+v", e)
	require.Equal(t, templates.DriverClusterAPI, e.Driver)
	require.Contains(t, e.Why, "`kubectl label namespace magnum-system app.kubernetes.io/managed-by=magnum-capi-bridge`")
	out, err := kubectl(t, mgmtKubeconfig, "label", "namespace", ns, "--overwrite", templates.LabelManagedBy+"="+templates.ManagedByValue)
	require.NoError(t, err, out)
	e = plan()
	require.Equal(t, adoption.Adopt, e.Action, "%+v", e)
	require.Contains(t, e.Why, "magnum-cluster-api's cluster "+stack+": to be taken over in place, its 2 machine(s) in 1 node group(s) kept")
	require.Contains(t, e.Why, "its ClusterClass magnum-v0.38.1 stays the old driver's")
	t.Logf("plan: %s %s %s: %s", e.Action, e.Driver, e.Name, e.Why)

	uids := machineUIDs(t, ns, stack)
	require.Len(t, uids, 2)
	started := time.Now()
	var results []struct {
		adoption.Entry
		Adopted bool   `json:"adopted"`
		Error   string `json:"error"`
		Steps   string `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(commandOutput(t, repoRoot(t), bin, append(base, "adoption", "run", "--json", id)...)), &results))
	require.Len(t, results, 1)
	require.True(t, results[0].Adopted, "%+v", results[0])
	t.Logf("%s: %s", stack, results[0].Steps)
	e = plan()
	require.Equal(t, adoption.Own, e.Action, "%+v", e)
	require.Contains(t, e.Why, "taken over from magnum-cluster-api")

	// The status sync: the address, version and health its old driver would have written.
	var c *clusterShow
	require.Eventually(t, func() bool {
		c, err = showCluster(t, cloudDemo, id)
		return err == nil && c.HealthStatus == "HEALTHY" && c.COEVersion == "v1.36.3" && c.APIAddress != "" && len(c.NodeAddresses) == 1
	}, 2*time.Minute, time.Second, "the taken-over cluster's status: %+v", c)
	t.Logf("TIMING takeover: address, version, health and node addresses in Magnum %.1f s after `adoption run` started", time.Since(started).Seconds())
	require.Equal(t, "CREATE_COMPLETE", c.Status)

	dir := t.TempDir()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "config", id, "--dir", dir, "--force")
	out, err = kubectl(t, filepath.Join(dir, "config"), "get", "nodes", "-o", "name")
	require.NoError(t, err, out)
	require.Len(t, strings.Fields(out), 2, out)

	// A change made outside Magnum (an autoscaler's, say) reaches the node group's row.
	require.ElementsMatch(t, uids, machineUIDs(t, ns, stack), "no Machine replaced by the take-over")
	out, err = kubectl(t, mgmtKubeconfig, "-n", ns, "patch", "clusters.cluster.x-k8s.io", stack, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/topology/workers/machineDeployments/0/replicas","value":2}]`)
	require.NoError(t, err, out)
	scaled := time.Now()
	var worker *nodeGroupShow
	require.Eventually(t, func() bool {
		worker, err = showNodeGroupIn(t, cloudDemo, id, "default-worker")
		return err == nil && worker.NodeCount == 2
	}, 2*time.Minute, time.Second, "default-worker's node_count follows its MachineDeployment: %+v", worker)
	t.Logf("TIMING takeover: the outside scale-up in default-worker's node_count %.1f s after the patch", time.Since(scaled).Seconds())
	require.Subset(t, machineUIDs(t, ns, stack), uids, "the scale-up replaced no Machine")

	// Changes stay refused: the call with NotSupported naming the driver, the cast changes nothing.
	logFrom := fileSize(t, logPath)
	_, err = openstack(t, cloudDemo, "coe", "cluster", "upgrade", id, createTemplate(t, cloudDemo))
	require.Error(t, err)
	require.Contains(t, err.Error(), "took it over from magnum-cluster-api")
	mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", id, "3")
	require.Eventually(t, func() bool {
		return strings.Contains(readFrom(t, logPath, logFrom), "Resizing a cluster is not supported for cluster "+id)
	}, time.Minute, time.Second, "the bridge logs the refused resize")
	c, err = showCluster(t, cloudDemo, id)
	require.NoError(t, err)
	require.Equal(t, "CREATE_COMPLETE", c.Status)

	mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	deleted := time.Now()
	waitGone(t, cloudDemo, id, 4*time.Minute)
	t.Logf("TIMING takeover: delete gone from Magnum %.1f s after the request", time.Since(deleted).Seconds())
	// What Cluster API owns goes with the Cluster through the garbage collector, moments later.
	var left []string
	require.Eventually(t, func() bool {
		out, err := kubectl(t, mgmtKubeconfig, "-n", ns, "get", "clusters.cluster.x-k8s.io,machines.cluster.x-k8s.io,secrets,clusterresourcesets.addons.cluster.x-k8s.io",
			"-o", "name")
		left = nil
		for _, line := range strings.Fields(out) {
			if strings.Contains(line, stack) || strings.Contains(line, id) {
				left = append(left, line)
			}
		}
		return err == nil && len(left) == 0
	}, 30*time.Second, time.Second, "left in %s after the delete: %v", ns, left)
	_, err = openstack(t, cloudDemo, "application", "credential", "show", vexx.credentialID)
	require.Error(t, err, "the cluster's application credential is deleted")
	_, err = store.GetX509KeyPair(ctx, certs.ClusterRefs(id).CACertRef)
	require.ErrorIs(t, err, magnum.ErrX509KeyPairNotFound, "the cluster's CA is deleted from Magnum's store")
}

// clusterAPICluster is a cluster as magnum-cluster-api left it.
type clusterAPICluster struct {
	id, stack, credentialID string
}

// standInClusterAPICluster makes what magnum-cluster-api leaves of a CREATE_COMPLETE cluster with
// one worker: Magnum's rows and, in its namespace, its objects under its names.
func standInClusterAPICluster(t *testing.T, store *db.Store, tok testutil.Token, templateUUID string) clusterAPICluster {
	t.Helper()
	ctx := context.Background()
	const class = "magnum-v0.38.1"
	ns := templates.ClusterAPINamespace
	c := clusterAPICluster{id: uuid.NewString(), stack: "kube-" + testutil.RandomHex(3)[:5]}
	name := "vexx-" + testutil.RandomHex(3)

	// Its rows: the CAs in Magnum's store, as Magnum's conductor makes them for every driver.
	pki, err := certs.GenerateCluster(name)
	require.NoError(t, err)
	master, worker := uuid.NewString(), uuid.NewString()
	ng := func(id, role, flavor string) *db.NodeGroup {
		return &db.NodeGroup{UUID: id, Name: "default-" + role, ProjectID: tok.ProjectID, Labels: magnum.NewDict(),
			FlavorID: db.Ptr(flavor), ImageID: db.Ptr(image), NodeAddresses: []string{}, NodeCount: db.Ptr[int64](1),
			MinNodeCount: db.Ptr[int64](0), Role: db.Ptr(role), IsDefault: true, StackID: db.Ptr(c.stack),
			Status: magnum.StatusCreateComplete}
	}
	labels := magnum.NewDict(templates.LabelKubeTag, "v1.36.3")
	_, _, err = store.CreateCluster(ctx, &db.Cluster{UUID: c.id, Name: db.Ptr(name), ProjectID: db.Ptr(tok.ProjectID), UserID: db.Ptr(tok.UserID),
		ClusterTemplateID: db.Ptr(templateUUID), Keypair: db.Ptr("default"), Labels: labels,
		MasterFlavorID: db.Ptr("m1.medium"), FlavorID: db.Ptr("m1.small"), StackID: db.Ptr(c.stack),
		Status: magnum.StatusCreateComplete, CreateTimeout: db.Ptr[int64](60), FloatingIPEnabled: true},
		ng(master, "master", "m1.medium"), ng(worker, "worker", "m1.small"))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = store.DeleteCluster(context.Background(), c.id) })
	refs := certs.ClusterRefs(c.id)
	row := func(ref string, kp certs.KeyPair) *db.X509KeyPair {
		key, pass := magnum.Secret(kp.PrivateKey), magnum.Secret(kp.Passphrase)
		return &db.X509KeyPair{UUID: ref, Certificate: &kp.Certificate, PrivateKey: &key, PrivateKeyPassphrase: &pass,
			ProjectID: &tok.ProjectID, UserID: &tok.UserID}
	}
	_, err = store.StoreClusterKeyPairs(ctx, c.id, []db.ClusterKeyPair{
		{RefColumn: "ca_cert_ref", KeyPair: row(refs.CACertRef, pki.KubernetesCA.Stored)},
		{RefColumn: "etcd_ca_cert_ref", KeyPair: row(refs.EtcdCACertRef, pki.EtcdCA.Stored)},
		{RefColumn: "front_proxy_ca_cert_ref", KeyPair: row(refs.FrontProxyCACertRef, pki.FrontProxyCA.Stored)},
		{RefColumn: "magnum_cert_ref", KeyPair: row(refs.MagnumCertRef, pki.MagnumClient.Stored)},
	})
	require.NoError(t, err)

	// Its application credential, named after the cluster, the tenant's.
	var cred struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloudDemo, "application", "credential", "create", c.id,
		"--description", "Magnum cluster ("+c.id+")", "-f", "json")), &cred))
	c.credentialID = cred.ID
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "application", "credential", "delete", cred.ID) })

	// Its namespace, not yet handed over to the bridge (an earlier run may have).
	if _, err := kubectl(t, mgmtKubeconfig, "get", "namespace", ns); err != nil {
		out, err := kubectl(t, mgmtKubeconfig, "create", "namespace", ns)
		require.NoError(t, err, out)
	}
	out, err := kubectl(t, mgmtKubeconfig, "label", "namespace", ns, templates.LabelManagedBy+"-")
	require.NoError(t, err, out)
	t.Cleanup(func() { _, _ = kubectl(t, mgmtKubeconfig, "label", "namespace", ns, templates.LabelManagedBy+"-") })

	objects := []map[string]any{}
	secret := func(name, typ string, labels map[string]string, data map[string]string) {
		objects = append(objects, map[string]any{"apiVersion": "v1", "kind": "Secret", "type": typ,
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels}, "stringData": data})
	}
	clouds, err := yaml.Marshal(map[string]any{"clouds": map[string]any{"default": map[string]any{
		"region_name": "RegionOne", "identity_api_version": 3, "verify": false,
		"auth": map[string]any{"auth_url": keystoneURL, "application_credential_id": cred.ID, "application_credential_secret": cred.Secret}}}})
	require.NoError(t, err)
	secret(templates.CloudConfigSecretName(c.stack), "Opaque", map[string]string{"cluster-uuid": c.id},
		map[string]string{"clouds.yaml": string(clouds), "cacert": ""})
	capiSecrets, err := pki.CAPISecrets(c.stack)
	require.NoError(t, err)
	for _, s := range capiSecrets {
		if !slices.Contains([]string{"ca", "etcd", "proxy", "sa"}, strings.TrimPrefix(s.Name, c.stack+"-")) {
			continue
		}
		data := map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		secret(s.Name, "cluster.x-k8s.io/secret", map[string]string{"cluster.x-k8s.io/cluster-name": c.stack}, data)
	}
	for _, set := range []string{c.id, c.stack + "-cloud-provider"} {
		secret(set, "addons.cluster.x-k8s.io/resource-set", nil, map[string]string{"configmap.yaml": fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: kube-system\ndata:\n  from: magnum-cluster-api\n", set)})
		objects = append(objects, map[string]any{"apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet",
			"metadata": map[string]any{"name": set, "namespace": ns},
			"spec": map[string]any{"strategy": "Reconcile", "clusterSelector": map[string]any{"matchLabels": map[string]any{"cluster-uuid": c.id}},
				"resources": []any{map[string]any{"kind": "Secret", "name": set}}}})
	}

	// Its class and Cluster: the in-memory infrastructure's objects under the driver's names.
	in := templatestest.BaseInput(templates.FlavorInMemory)
	in.Namespace = ns
	in.Cluster.UUID, in.Cluster.Name, in.Cluster.ProjectID = c.id, name, tok.ProjectID
	in.NodeGroups[0].UUID, in.NodeGroups[1].UUID, in.NodeGroups[1].NodeCount = master, worker, 1
	rendered, err := templates.Render(in)
	require.NoError(t, err)
	for _, o := range rendered.ClassObjects {
		o.SetName(class) // the driver names its class and every template of it alike
		o.SetLabels(nil)
		renameTemplateRefs(o.Object, class)
		objects = append(objects, o.Object)
	}
	cl := rendered.Cluster
	cl.SetName(c.stack)
	cl.SetLabels(map[string]string{"cluster-uuid": c.id})
	cl.SetAnnotations(nil)
	require.NoError(t, unstructured.SetNestedField(cl.Object, class, "spec", "topology", "classRef", "name"))
	require.NoError(t, unstructured.SetNestedSlice(cl.Object, []any{map[string]any{"class": "default-worker", "name": "default-worker", "replicas": int64(1)}},
		"spec", "topology", "workers", "machineDeployments"))
	objects = append(objects, cl.Object)
	manifest, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objects})
	require.NoError(t, err)
	// Validated by the apiserver: kubectl's own validation downloads the OpenAPI document, which a
	// busy apiserver may not serve within the request timeout. Server-side apply can be repeated.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Second) {
		out, err = kubectlStdin(t, mgmtKubeconfig, manifest, "apply", "--server-side", "--validate=false", "--field-manager=magnum-cluster-api", "-f", "-")
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err, out)
	t.Cleanup(func() {
		// What the test made in the namespace, also when it failed before the delete.
		_, _ = kubectl(t, mgmtKubeconfig, "-n", ns, "delete", "clusters.cluster.x-k8s.io", c.stack, "--ignore-not-found", "--wait=false")
		_, _ = kubectlStdin(t, mgmtKubeconfig, manifest, "delete", "--ignore-not-found", "--wait=false", "-f", "-")
	})
	require.Eventually(t, func() bool {
		out, err := kubectl(t, mgmtKubeconfig, "-n", ns, "get", "machines.cluster.x-k8s.io", "-l", "cluster.x-k8s.io/cluster-name="+c.stack,
			"-o", "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}")
		return err == nil && strings.Count(out, "Running") == 2
	}, 4*time.Minute, 2*time.Second, "the stand-in's two machines run")
	return c
}

// renameTemplateRefs points every templateRef of a ClusterClass at name.
func renameTemplateRefs(v any, name string) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if ref, ok := child.(map[string]any); ok && k == "templateRef" {
				ref["name"] = name
				continue
			}
			renameTemplateRefs(child, name)
		}
	case []any:
		for _, child := range v {
			renameTemplateRefs(child, name)
		}
	}
}

// machineUIDs are the UIDs of the Machines of Cluster namespace/name.
func machineUIDs(t *testing.T, namespace, name string) []string {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "-n", namespace, "get", "machines.cluster.x-k8s.io", "-l", "cluster.x-k8s.io/cluster-name="+name,
		"-o", "jsonpath={.items[*].metadata.uid}")
	require.NoError(t, err, out)
	return strings.Fields(out)
}
