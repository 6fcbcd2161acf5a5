package peer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The bridge takes over a running Magnum whose conductor is the peer (magnum-conductor 23.0.0 with
// magnum-capi-helm): the peer makes two clusters, one with an extra node group, and is stopped; the
// bridge starts on the same database and vhost, plans, is killed in the middle of the adoption and
// finishes it after a restart. No Machine of the adopted clusters is replaced by any of it, nor by
// the operations after it (resize, node group create and delete), the CA is the same (a
// kubeconfig signed by the peer keeps working), an upgrade rolls within the adopted class, and a
// delete leaves nothing of the cluster behind.
func TestAdoptCAPIHelmClusters(t *testing.T) {
	if os.Getenv("MCB_PEER") != "1" {
		t.Skip("MCB_PEER=1 runs the adoption of the peer conductor's clusters on the local stack (`make test-adoption`, after `make up`)")
	}
	testutil.Require(t, testutil.E2E)
	testutil.Require(t, testutil.Integration)
	ctx := context.Background()
	env := newBenchEnv(t)
	peer := env.startPeer(t)
	// The peer's clusters run the older of the simulator's images, so that they can be upgraded.
	_, err := peer.db.ExecContext(ctx, "UPDATE cluster_template SET image_id = ? WHERE uuid = ?", olderImage, peer.template)
	require.NoError(t, err)
	env.startFakeAddonProvider(t, peer.namespacePrefix+"-")
	made := env.createCompleteClusters(ctx, t, peer,
		peerClusterSpec{name: "adopt-a", extraNodeGroup: "extra"}, peerClusterSpec{name: "adopt-b"})
	a, b := made[0], made[1]
	ns := a.namespace
	// A kubeconfig from the peer, as `coe cluster config` makes it (its CA, a certificate it signed).
	before := env.workloadConfig(ctx, t, peer, a.uuid)
	require.NoError(t, workloadReachable(ctx, before), "the peer's kubeconfig before the adoption")
	uids := map[string]map[string]types.UID{}
	for _, c := range made {
		uids[c.uuid] = env.machineUIDs(ctx, t, ns, c.stackID)
	}
	heat := insertHeatRow(ctx, t, peer)
	peer.stop()
	t0 := time.Now()

	// The operator hands the namespace over and starts the bridge on the peer's database and vhost.
	env.handOverNamespace(ctx, t, ns, env.token.projectID)
	bridge := env.startBridgeOn(t, peer)
	own, _, err := env.castCreate(ctx, bridge, "own")
	require.NoError(t, err)
	require.NoError(t, waitClusterStatus(ctx, bridge, own, magnum.StatusCreateInProgress, time.Minute))

	plan := env.adoptionPlan(ctx, t, bridge)
	want := map[string]adoption.Action{a.uuid: adoption.Adopt, b.uuid: adoption.Adopt, own: adoption.Own, heat: adoption.Leave}
	got := map[string]adoption.Action{}
	for _, e := range plan {
		got[e.UUID] = e.Action
		fmt.Printf("# plan: %s %s %s: %s\n", e.Action, e.Driver, e.Name, e.Why)
	}
	require.Equal(t, want, got)
	for _, c := range made {
		require.Equal(t, uids[c.uuid], env.machineUIDs(ctx, t, ns, c.stackID), "the plan changes nothing")
	}
	// The bridge's own cluster was there for the plan only.
	require.NoError(t, bridge.rpc.Cast(ctx, "cluster_delete", map[string]any{"uuid": own}, env.token.context()))

	// Killed in the middle of b's adoption: an admission policy holds its last step (the topology,
	// refused with 403, which the bridge retries), the bridge is killed once the steps before it are
	// done, and a new bridge's run finishes.
	unblock := env.holdTopology(ctx, t, ns, b.stackID)
	go func() { _, _ = env.adoptionRun(ctx, bridge, b.uuid) }()
	env.waitFor(ctx, t, "b's class and labelled MachineDeployments", 2*time.Minute, func() bool {
		var cc clusterv1.ClusterClass
		var mds clusterv1.MachineDeploymentList
		_ = env.kube.List(ctx, &mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: b.stackID})
		return env.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.stackID + "-adopted"}, &cc) == nil &&
			len(mds.Items) == 1 && mds.Items[0].Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] != ""
	})
	time.Sleep(2 * time.Second) // a retry or two of the topology, refused
	var held clusterv1.Cluster
	require.NoError(t, env.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.stackID}, &held))
	require.False(t, held.Spec.Topology.IsDefined(), "the policy holds the topology")
	bridge.kill()
	unblock()
	bridge = env.startBridgeOn(t, peer)
	// The run adopts a, and b unless the killed run's call, redelivered to the new bridge, finished
	// it first (the bridge acknowledges a message once handled).
	results, err := env.adoptionRun(ctx, bridge)
	require.NoError(t, err)
	for _, r := range results {
		fmt.Printf("# adoption run: %s adopted=%v steps %s %s\n", r.Name, r.Adopted, r.Steps, r.Error)
		require.True(t, r.Adopted, "%s: %s", r.Name, r.Error)
	}
	fmt.Printf("# TIMING adoption: both clusters adopted %.1f s after the peer stopped\n", time.Since(t0).Seconds())
	after := map[string]adoption.Action{}
	for _, e := range env.adoptionPlan(ctx, t, bridge) {
		after[e.UUID] = e.Action
		if e.UUID == a.uuid || e.UUID == b.uuid {
			require.Contains(t, e.Why, "adopted from magnum-capi-helm")
		}
	}
	require.Equal(t, adoption.Own, after[a.uuid])
	require.Equal(t, adoption.Own, after[b.uuid])
	// Helm has forgotten the releases.
	for _, c := range made {
		var secrets corev1.SecretList
		require.NoError(t, env.kube.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": c.stackID}))
		require.Empty(t, secrets.Items, "Helm release Secrets of %s", c.stackID)
	}

	// Three minutes: nothing rolls, nothing leaves *_COMPLETE.
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		for _, c := range made {
			require.Equal(t, uids[c.uuid], env.machineUIDs(ctx, t, ns, c.stackID), "machines of %s after the adoption", c.name)
			require.Equal(t, string(c.status), rowStatus(ctx, t, bridge, c.uuid))
		}
		time.Sleep(10 * time.Second)
	}
	require.NoError(t, workloadReachable(ctx, before), "the peer's kubeconfig after the adoption")
	require.NoError(t, workloadReachable(ctx, env.workloadConfig(ctx, t, bridge, a.uuid)), "a kubeconfig the bridge signs")

	// Day 2 on a: resize the default worker 1 → 2, then a node group created and deleted.
	t1 := time.Now()
	defaultWorker := nodeGroupNamed(ctx, t, bridge, a.uuid, "default-worker")
	require.NoError(t, env.castResize(ctx, bridge, a.uuid, defaultWorker, 2))
	require.NoError(t, waitUpdate(ctx, bridge, a.uuid))
	require.NoError(t, env.waitMachinesRunning(ctx, ns, a.stackID, 4, completeTimeout))
	resized := env.machineUIDs(ctx, t, ns, a.stackID)
	require.Subset(t, slices.Collect(maps.Values(resized)), slices.Collect(maps.Values(uids[a.uuid])), "a resize adds a machine, replaces none")
	fmt.Printf("# TIMING adopted resize 1→2: UPDATE_COMPLETE and 4 Machines Running %.1f s after the cast\n", time.Since(t1).Seconds())

	t1 = time.Now()
	ng, err := env.castNodeGroupCreate(ctx, bridge, a.uuid, "later", 1)
	require.NoError(t, err)
	require.NoError(t, waitNodeGroupStatus(ctx, bridge, a.uuid, ng, magnum.StatusCreateComplete, completeTimeout))
	require.NoError(t, env.waitMachinesRunning(ctx, ns, a.stackID, 5, completeTimeout))
	fmt.Printf("# TIMING adopted node group create: CREATE_COMPLETE and its Machine Running %.1f s after the cast\n", time.Since(t1).Seconds())
	t1 = time.Now()
	require.NoError(t, env.castNodeGroupDelete(ctx, bridge, a.uuid, ng))
	require.NoError(t, waitNodeGroupGone(ctx, bridge, a.uuid, ng, completeTimeout))
	require.NoError(t, waitClusterStatus(ctx, bridge, a.uuid, magnum.StatusUpdateComplete, completeTimeout))
	require.NoError(t, env.waitMachinesRunning(ctx, ns, a.stackID, 4, completeTimeout))
	require.Equal(t, resized, env.machineUIDs(ctx, t, ns, a.stackID), "a node group's delete replaces no other machine")
	fmt.Printf("# TIMING adopted node group delete: gone %.1f s after the cast\n", time.Since(t1).Seconds())

	// The credential magnum-capi-helm made is replaced by a rotation and deleted; the chart's
	// Secret, which its add-ons read, gets the new workload credential.
	t1 = time.Now()
	chartCredentials := env.namespaceCredentials(ctx, t, ns, a.stackID)
	enc, err := encodeCluster(ctx, bridge, a.uuid)
	require.NoError(t, err)
	_, err = bridge.rpc.Call(ctx, "credential_rotate", map[string]any{"cluster": enc}, env.token.context(), time.Minute)
	require.NoError(t, err)
	rotated := env.namespaceCredentials(ctx, t, ns, a.stackID)
	for _, id := range chartCredentials {
		require.NotContains(t, rotated, id, "the old credential after the rotation")
		require.False(t, env.applicationCredentialExists(ctx, t, id), "the old credential %s is deleted", id)
	}
	require.Len(t, rotated, 2, "the bridge's two credentials, the workload one also in the chart's Secret")
	fmt.Printf("# TIMING adopted credential rotation: %.1f s\n", time.Since(t1).Seconds())

	// A resize back to one worker removes the machine named in nodes_to_remove: the original.
	t1 = time.Now()
	var original string
	for name, uid := range resized {
		if strings.Contains(name, "-default-worker-") && slices.Contains(slices.Collect(maps.Values(uids[a.uuid])), uid) {
			original = name
		}
	}
	require.NotEmpty(t, original)
	defaultWorker = nodeGroupNamed(ctx, t, bridge, a.uuid, "default-worker")
	require.NoError(t, env.castResize(ctx, bridge, a.uuid, defaultWorker, 1, original))
	require.NoError(t, waitUpdate(ctx, bridge, a.uuid))
	require.NoError(t, env.waitMachinesRunning(ctx, ns, a.stackID, 3, completeTimeout))
	left := env.machineUIDs(ctx, t, ns, a.stackID)
	require.NotContains(t, left, original, "nodes_to_remove names the machine that goes")
	require.Len(t, left, 3)
	fmt.Printf("# TIMING adopted resize 2→1 removing %s: UPDATE_COMPLETE %.1f s after the cast\n", original, time.Since(t1).Seconds())

	// b is upgraded: its machines roll, within its adopted class.
	t1 = time.Now()
	target := insertTemplate(ctx, t, bridge, "adopt-upgrade", newerImage, map[string]string{})
	require.NoError(t, env.callUpgrade(ctx, bridge, b.uuid, target))
	require.NoError(t, waitUpdate(ctx, bridge, b.uuid))
	var bc clusterv1.Cluster
	require.NoError(t, env.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.stackID}, &bc))
	require.Equal(t, b.stackID+"-adopted", bc.Spec.Topology.ClassRef.Name, "an upgrade keeps the adopted class")
	require.Equal(t, upgradeVersion, bc.Spec.Topology.Version)
	fmt.Printf("# TIMING adopted upgrade to %s: UPDATE_COMPLETE %.1f s after the call\n", upgradeVersion, time.Since(t1).Seconds())

	// The deletes leave nothing: CAPI objects, Secrets, Helm's, the application credentials.
	for _, c := range made {
		credentials := env.namespaceCredentials(ctx, t, ns, c.stackID)
		require.NotEmpty(t, credentials, "the credentials of %s", c.name)
		t1 = time.Now()
		require.NoError(t, bridge.rpc.Cast(ctx, "cluster_delete", map[string]any{"uuid": c.uuid}, env.token.context()))
		waitRowGone(ctx, bridge.db, c.uuid, completeTimeout)
		require.Equal(t, "", rowStatus(ctx, t, bridge, c.uuid), "%s deleted", c.name)
		fmt.Printf("# TIMING adopted delete: %s gone from Magnum %.1f s after the cast\n", c.name, time.Since(t1).Seconds())
		env.requireNothingLeft(ctx, t, ns, c.uuid, c.stackID, credentials)
	}
}

// The simulator's two images (named after the Kubernetes version, which their kube_version says
// too): the peer's clusters start on the older, the upgrade's template has the newer.
const (
	olderImage     = "ubuntu-2404-kube-v1.35.4"
	newerImage     = "ubuntu-2404-kube-v1.36.3"
	upgradeVersion = "v1.36.3"
)

// startBridgeOn starts a bridge on the peer's database and vhost, in the peer's namespaces, which
// knows magnum-capi-helm's namespace prefix (the peer's).
func (e *benchEnv) startBridgeOn(tb testing.TB, peer *side) *side {
	return e.startBridgeWith(tb, bridgeSetup{dbURL: peer.dbURL, transportURL: peer.transportURL, db: peer.db, template: peer.template,
		namespacePrefix: peer.namespacePrefix + "-", capiHelmNamespacePrefix: peer.namespacePrefix})
}

// holdTopology makes the apiserver refuse the Cluster namespace/name a topology (403, as an
// admission policy refuses) until the returned func is called.
func (e *benchEnv) holdTopology(ctx context.Context, tb testing.TB, namespace, name string) (release func()) {
	policyName := "mcb-test-hold-topology-" + name
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"clusters"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!(object.metadata.namespace == %q && object.metadata.name == %q && has(object.spec.topology))", namespace, name),
				Message:    "held by the adoption test",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	require.NoError(tb, e.kube.Create(ctx, policy))
	require.NoError(tb, e.kube.Create(ctx, binding))
	release = sync.OnceFunc(func() {
		_ = e.kube.Delete(ctx, binding)
		_ = e.kube.Delete(ctx, policy)
	})
	tb.Cleanup(release)
	// The policy is in force once a dry run of the refused change is refused.
	e.waitFor(ctx, tb, "the policy holding "+name, time.Minute, func() bool {
		var c clusterv1.Cluster
		if e.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &c) != nil {
			return false
		}
		c.Spec.Topology.ClassRef.Name = "held"
		c.Spec.Topology.Version = "v1.0.0"
		err := e.kube.Update(ctx, &c, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "held by the adoption test")
	})
	return release
}

func (e *benchEnv) adminContext() *rpc.Context {
	c := e.token.context()
	c.IsAdmin = true
	return c
}

func (e *benchEnv) adoptionPlan(ctx context.Context, tb testing.TB, s *side) []adoption.Entry {
	raw, err := s.rpc.Call(ctx, conductor.MethodAdoptionPlan, map[string]any{}, e.adminContext(), 2*time.Minute)
	require.NoError(tb, err)
	var entries []adoption.Entry
	require.NoError(tb, json.Unmarshal(raw, &entries))
	return entries
}

func (e *benchEnv) adoptionRun(ctx context.Context, s *side, clusters ...string) ([]conductor.AdoptionResult, error) {
	args := map[string]any{}
	if len(clusters) > 0 {
		args["clusters"] = clusters
	}
	raw, err := s.rpc.Call(ctx, conductor.MethodAdoptionRun, args, e.adminContext(), 10*time.Minute)
	if err != nil {
		return nil, err
	}
	var results []conductor.AdoptionResult
	return results, json.Unmarshal(raw, &results)
}

// handOverNamespace is the operator's step the plan names: the namespace magnum-capi-helm made
// becomes a project namespace of the bridge.
func (e *benchEnv) handOverNamespace(ctx context.Context, tb testing.TB, name, projectID string) {
	patch := fmt.Sprintf(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"magnum-capi-bridge","magnum.openstack.org/project-id":%q}}}`, projectID)
	ns := &corev1.Namespace{}
	ns.Name = name
	require.NoError(tb, e.kube.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(patch))))
}

func (e *benchEnv) machineUIDs(ctx context.Context, tb testing.TB, namespace, clusterName string) map[string]types.UID {
	var list clusterv1.MachineList
	require.NoError(tb, e.kube.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName}))
	out := map[string]types.UID{}
	for _, m := range list.Items {
		out[m.Name] = m.UID
	}
	return out
}

func (e *benchEnv) waitFor(ctx context.Context, tb testing.TB, what string, timeout time.Duration, done func() bool) {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			tb.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitUpdate waits for an update the bridge was just asked for: UPDATE_IN_PROGRESS, then
// UPDATE_COMPLETE (a cluster the peer left UPDATE_COMPLETE is not done by being so).
func waitUpdate(ctx context.Context, s *side, clusterUUID string) error {
	if err := waitClusterStatus(ctx, s, clusterUUID, magnum.StatusUpdateInProgress, time.Minute); err != nil {
		return err
	}
	return waitClusterStatus(ctx, s, clusterUUID, magnum.StatusUpdateComplete, completeTimeout)
}

func rowStatus(ctx context.Context, tb testing.TB, s *side, id string) string {
	var status *string
	err := s.db.QueryRowContext(ctx, "SELECT status FROM cluster WHERE uuid = ?", id).Scan(&status)
	if err != nil || status == nil {
		return ""
	}
	return *status
}

// insertHeatRow is a Heat driver's cluster as magnum-api and Magnum's Heat conductor leave it: a
// template of the Fedora CoreOS driver and a stack's uuid as stack_id.
func insertHeatRow(ctx context.Context, tb testing.TB, s *side) string {
	tmpl := insertTemplate(ctx, tb, s, "heat-fcos", olderImage, map[string]string{})
	_, err := s.db.ExecContext(ctx, "UPDATE cluster_template SET driver = 'k8s_fedora_coreos_v1' WHERE uuid = ?", tmpl)
	require.NoError(tb, err)
	store, err := db.Open(ctx, s.dbURL)
	require.NoError(tb, err)
	defer store.Close()
	id := uuid.NewString()
	c := &db.Cluster{UUID: id, Name: ptr.To("heat-old"), ProjectID: ptr.To("p-heat"), UserID: ptr.To("u-heat"), ClusterTemplateID: &tmpl,
		StackID: ptr.To(uuid.NewString()), Status: magnum.StatusCreateComplete}
	_, _, err = store.CreateCluster(ctx, c)
	require.NoError(tb, err)
	return id
}

// insertTemplate copies the side's template with another name, image and labels; it returns its uuid.
func insertTemplate(ctx context.Context, tb testing.TB, s *side, name, image string, labels map[string]string) string {
	raw, err := json.Marshal(labels)
	require.NoError(tb, err)
	id := uuid.NewString()
	_, err = s.db.ExecContext(ctx, "INSERT INTO cluster_template (uuid, name, coe, public, server_type, image_id, project_id, user_id, "+
		"flavor_id, master_flavor_id, keypair_id, external_network_id, network_driver, driver, labels, tls_disabled, registry_enabled, "+
		"master_lb_enabled, floating_ip_enabled, hidden) SELECT ?, ?, coe, public, server_type, ?, project_id, user_id, flavor_id, "+
		"master_flavor_id, keypair_id, external_network_id, network_driver, driver, ?, tls_disabled, registry_enabled, master_lb_enabled, "+
		"floating_ip_enabled, hidden FROM cluster_template WHERE uuid = ?", id, name, image, string(raw), s.template)
	require.NoError(tb, err)
	return id
}

// rows reads a cluster with its template, as magnum-api sends it, and its node groups.
func rows(ctx context.Context, s *side, clusterUUID string) (*magnum.Cluster, []*magnum.NodeGroup, error) {
	store, err := db.Open(ctx, s.dbURL)
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	row, err := store.GetCluster(ctx, clusterUUID)
	if err != nil {
		return nil, nil, err
	}
	cl := row.View()
	groups, err := store.ListNodeGroups(ctx, clusterUUID)
	if err != nil {
		return nil, nil, err
	}
	var out []*magnum.NodeGroup
	for _, g := range groups {
		out = append(out, g.View())
	}
	magnum.ResetChanges(cl)
	return cl, out, nil
}

func nodeGroupNamed(ctx context.Context, tb testing.TB, s *side, clusterUUID, name string) *magnum.NodeGroup {
	_, groups, err := rows(ctx, s, clusterUUID)
	require.NoError(tb, err)
	for _, g := range groups {
		if g.Name.Or("") == name {
			return g
		}
	}
	tb.Fatalf("cluster %s has no node group %s", clusterUUID, name)
	return nil
}

func encode(objs ...magnum.View) ([]*magnum.Object, error) {
	vs := magnum.NewVersions(magnum.Versions23)
	out := make([]*magnum.Object, len(objs))
	for i, o := range objs {
		enc, err := magnum.Encode(o, vs)
		if err != nil {
			return nil, err
		}
		out[i] = enc
	}
	return out, nil
}

// castResize sends cluster_resize as magnum-api 23.0.0 does for `coe cluster resize --nodegroup`.
func (e *benchEnv) castResize(ctx context.Context, s *side, clusterUUID string, ng *magnum.NodeGroup, count int64, remove ...string) error {
	cl, _, err := rows(ctx, s, clusterUUID)
	if err != nil {
		return err
	}
	enc, err := encode(cl, ng)
	if err != nil {
		return err
	}
	return s.rpc.Cast(ctx, "cluster_resize", map[string]any{"cluster": enc[0], "node_count": count, "nodes_to_remove": append([]string{}, remove...),
		"nodegroup": enc[1]}, e.token.context())
}

// encodeCluster is the cluster as magnum-api sends it.
func encodeCluster(ctx context.Context, s *side, clusterUUID string) (*magnum.Object, error) {
	cl, _, err := rows(ctx, s, clusterUUID)
	if err != nil {
		return nil, err
	}
	enc, err := encode(cl)
	if err != nil {
		return nil, err
	}
	return enc[0], nil
}

// castNodeGroupDelete sends nodegroup_delete as magnum-api 23.0.0 does.
func (e *benchEnv) castNodeGroupDelete(ctx context.Context, s *side, clusterUUID, ngUUID string) error {
	cl, groups, err := rows(ctx, s, clusterUUID)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if g.UUID.Or("") == ngUUID {
			enc, err := encode(cl, g)
			if err != nil {
				return err
			}
			return s.rpc.Cast(ctx, "nodegroup_delete", map[string]any{"cluster": enc[0], "nodegroup": enc[1]}, e.token.context())
		}
	}
	return fmt.Errorf("cluster %s has no node group %s", clusterUUID, ngUUID)
}

func waitNodeGroupGone(ctx context.Context, s *side, clusterUUID, ngUUID string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM nodegroup WHERE cluster_id = ? AND uuid = ?", clusterUUID, ngUUID).Scan(&n); err == nil && n == 0 {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("node group %s still there after %s", ngUUID, timeout)
}

// callUpgrade calls cluster_upgrade as magnum-api 23.0.0 does for `coe cluster upgrade`.
func (e *benchEnv) callUpgrade(ctx context.Context, s *side, clusterUUID, templateUUID string) error {
	store, err := db.Open(ctx, s.dbURL)
	if err != nil {
		return err
	}
	defer store.Close()
	cl, groups, err := rows(ctx, s, clusterUUID)
	if err != nil {
		return err
	}
	tmpl, err := store.GetClusterTemplate(ctx, templateUUID)
	if err != nil {
		return err
	}
	var worker *magnum.NodeGroup
	for _, g := range groups {
		if g.IsDefault.Or(false) && g.Role.Or("") != "master" {
			worker = g
		}
	}
	enc, err := encode(cl, tmpl.View(), worker)
	if err != nil {
		return err
	}
	_, err = s.rpc.Call(ctx, "cluster_upgrade", map[string]any{"cluster": enc[0], "cluster_template": enc[1], "max_batch_size": 1,
		"nodegroup": enc[2]}, e.token.context(), time.Minute)
	return err
}

// workloadConfig is what `coe cluster config` builds: the API address, the cluster's CA
// (get_ca_certificate) and a client certificate for system:masters the conductor signs.
func (e *benchEnv) workloadConfig(ctx context.Context, tb testing.TB, s *side, clusterUUID string) *rest.Config {
	cl, _, err := rows(ctx, s, clusterUUID)
	require.NoError(tb, err)
	enc, err := encode(cl)
	require.NoError(tb, err)
	raw, err := s.rpc.Call(ctx, "get_ca_certificate", map[string]any{"cluster": enc[0], "ca_cert_type": nil}, e.token.context(), time.Minute)
	require.NoError(tb, err, "get_ca_certificate from %s", s.name)
	caPEM := certificatePEM(tb, raw)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}}, key)
	require.NoError(tb, err)
	cert := &magnum.Certificate{}
	cert.ClusterUUID.Set(clusterUUID)
	cert.ProjectID.Set(e.token.projectID)
	cert.UserID.Set(e.token.userID)
	cert.CSR.Set(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr})))
	certEnc, err := encode(cert)
	require.NoError(tb, err)
	raw, err = s.rpc.Call(ctx, "sign_certificate", map[string]any{"cluster": enc[0], "certificate": certEnc[0]}, e.token.context(), time.Minute)
	require.NoError(tb, err, "sign_certificate from %s", s.name)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(tb, err)
	return &rest.Config{Host: cl.APIAddress.Or(""), Timeout: 20 * time.Second, TLSClientConfig: rest.TLSClientConfig{
		CAData: caPEM, CertData: certificatePEM(tb, raw), KeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}}
}

// certificatePEM is the pem of a Certificate object in a reply.
func certificatePEM(tb testing.TB, raw json.RawMessage) []byte {
	var obj struct {
		Data struct {
			PEM string `json:"pem"`
		} `json:"magnum_object.data"`
	}
	require.NoError(tb, json.Unmarshal(raw, &obj))
	require.NotEmpty(tb, obj.Data.PEM, "no pem in %s", raw)
	return []byte(obj.Data.PEM)
}

// workloadReachable lists the workload cluster's nodes with the config.
func workloadReachable(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(nodes.Items) == 0 {
		return fmt.Errorf("the workload cluster at %s lists no node", cfg.Host)
	}
	return nil
}

// namespaceCredentials are the application credential ids the cluster's Secrets name.
func (e *benchEnv) namespaceCredentials(ctx context.Context, tb testing.TB, namespace, clusterName string) []string {
	var ids []string
	for _, name := range []string{clusterName + "-cloud-credentials", clusterName + "-cloud-config"} {
		var s corev1.Secret
		if err := e.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err == nil {
			ids = append(ids, credentialIDs(s.Data["clouds.yaml"])...)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// applicationCredentialExists asks Keystone, as the tenant, whether its credential exists.
func (e *benchEnv) applicationCredentialExists(ctx context.Context, tb testing.TB, id string) bool {
	url := fmt.Sprintf("%s/users/%s/application_credentials/%s", keystoneURL, e.token.userID, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(tb, err)
	req.Header.Set("X-Auth-Token", e.token.id)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	resp.Body.Close()
	require.Contains(tb, []int{http.StatusOK, http.StatusNotFound}, resp.StatusCode, "Keystone on application credential %s", id)
	return resp.StatusCode == http.StatusOK
}

// requireNothingLeft checks that a deleted cluster left nothing: no CAPI object of it, no Secret
// labelled with it or named after it, no Helm release Secret, no application credential it held.
func (e *benchEnv) requireNothingLeft(ctx context.Context, tb testing.TB, namespace, clusterUUID, clusterName string, credentials []string) {
	e.waitFor(ctx, tb, "the CAPI objects of "+clusterName, 5*time.Minute, func() bool {
		var clusters clusterv1.ClusterList
		var mds clusterv1.MachineDeploymentList
		var machines clusterv1.MachineList
		var classes clusterv1.ClusterClassList
		_ = e.kube.List(ctx, &clusters, client.InNamespace(namespace))
		_ = e.kube.List(ctx, &mds, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})
		_ = e.kube.List(ctx, &machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})
		_ = e.kube.List(ctx, &classes, client.InNamespace(namespace))
		for _, c := range clusters.Items {
			if c.Name == clusterName {
				return false
			}
		}
		for _, c := range classes.Items {
			if c.Name == clusterName+"-adopted" {
				return false
			}
		}
		return len(mds.Items) == 0 && len(machines.Items) == 0
	})
	var secrets corev1.SecretList
	require.NoError(tb, e.kube.List(ctx, &secrets, client.InNamespace(namespace)))
	for _, s := range secrets.Items {
		left := s.Labels["magnum.openstack.org/cluster-uuid"] == clusterUUID || strings.HasPrefix(s.Name, clusterName+"-") ||
			strings.HasPrefix(s.Name, "sh.helm.release.v1."+clusterName+".")
		require.False(tb, left, "Secret %s of the deleted cluster %s", s.Name, clusterName)
	}
	for _, id := range credentials {
		require.False(tb, e.applicationCredentialExists(ctx, tb, id), "application credential %s of the deleted cluster %s", id, clusterName)
	}
}
