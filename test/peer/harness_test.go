package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
)

// What a test needs to have the peer make complete clusters and hand them to another conductor:
//
//	env := newBenchEnv(t)
//	peer := env.startPeer(t)
//	env.startFakeAddonProvider(t, peer.namespacePrefix+"-")
//	clusters := env.createCompleteClusters(ctx, t, peer, peerClusterSpec{name: "a", extraNodeGroup: "extra"}, peerClusterSpec{name: "b"})
//	peer.stop()
//	// another conductor on peer.dbURL, peer.transportURL, namespaces capiHelmNamespace(peer.namespacePrefix, env.token.projectID)
//
// The clusters, their namespaces and the tenant's application credentials are removed when the test
// ends (cleanupClustersAtEnd), whoever holds them by then.

// peerClusterSpec is a cluster for a conductor to make: one master and one worker (cluster_create as
// magnum-api sends it) and, when extraNodeGroup is set, a node group of that name with one worker
// added once the cluster is complete (nodegroup_create).
type peerClusterSpec struct {
	name           string
	extraNodeGroup string
}

// peerCluster is a complete cluster and how long each step took.
type peerCluster struct {
	uuid, name string
	stackID    string // the Helm release: the CAPI Cluster's name
	namespace  string
	// status is the row's: CREATE_COMPLETE, or UPDATE_COMPLETE once a node group was added.
	status magnum.ClusterStatus
	// extraNodeGroup is the uuid of the node group nodegroup_create added ("" without).
	extraNodeGroup string
	// toCreateComplete: cluster_create cast → CREATE_COMPLETE; toNodeGroupComplete: nodegroup_create
	// cast → the node group CREATE_COMPLETE and the cluster UPDATE_COMPLETE; toMachinesRunning:
	// cluster_create cast → every Machine of the cluster (the added group's too) Running.
	toCreateComplete, toNodeGroupComplete, toMachinesRunning time.Duration
}

// Long enough for a create on a loaded 2-core machine; typical figures are in README.md.
const completeTimeout = 15 * time.Minute

// createCompleteClusters casts the creates at once and waits until every cluster is complete in the
// conductor's database, its added node group too, and every Machine of it Running; it fails the
// test otherwise. The peer completes a cluster only when its add-ons are Deployed: start the fake
// add-on provider first.
func (e *benchEnv) createCompleteClusters(ctx context.Context, tb testing.TB, s *side, specs ...peerClusterSpec) []*peerCluster {
	tb.Helper()
	clusters := make([]*peerCluster, len(specs))
	cast := make([]time.Time, len(specs))
	for i, spec := range specs {
		id, at, err := e.castCreate(ctx, s, spec.name)
		if err != nil {
			tb.Fatalf("%s: cast cluster_create %s: %v", s.name, spec.name, err)
		}
		clusters[i] = &peerCluster{uuid: id, name: spec.name}
		cast[i] = at
	}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { errs[i] = e.completeCluster(ctx, s, spec, clusters[i], cast[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("%s: %v\n%s", s.name, err, s.logTail(40))
	}
	return clusters
}

func (e *benchEnv) completeCluster(ctx context.Context, s *side, spec peerClusterSpec, c *peerCluster, cast time.Time) error {
	if err := waitClusterStatus(ctx, s, c.uuid, magnum.StatusCreateComplete, completeTimeout); err != nil {
		return fmt.Errorf("cluster %s: %w", spec.name, err)
	}
	c.toCreateComplete = time.Since(cast)
	c.status = magnum.StatusCreateComplete
	fmt.Printf("# %s: %s CREATE_COMPLETE %.1f s after cluster_create\n", s.name, spec.name, c.toCreateComplete.Seconds())
	machines := 2 // the master and the default worker
	if spec.extraNodeGroup != "" {
		at := time.Now()
		id, err := e.castNodeGroupCreate(ctx, s, c.uuid, spec.extraNodeGroup, 1)
		if err != nil {
			return fmt.Errorf("cluster %s: cast nodegroup_create: %w", spec.name, err)
		}
		if err := waitNodeGroupStatus(ctx, s, c.uuid, id, magnum.StatusCreateComplete, completeTimeout); err != nil {
			return fmt.Errorf("cluster %s, node group %s: %w", spec.name, spec.extraNodeGroup, err)
		}
		if err := waitClusterStatus(ctx, s, c.uuid, magnum.StatusUpdateComplete, completeTimeout); err != nil {
			return fmt.Errorf("cluster %s after nodegroup_create: %w", spec.name, err)
		}
		c.extraNodeGroup, c.status, c.toNodeGroupComplete = id, magnum.StatusUpdateComplete, time.Since(at)
		machines++
		fmt.Printf("# %s: %s node group %s CREATE_COMPLETE, cluster UPDATE_COMPLETE %.1f s after nodegroup_create\n",
			s.name, spec.name, spec.extraNodeGroup, c.toNodeGroupComplete.Seconds())
	}
	var project string
	if err := s.db.QueryRowContext(ctx, "SELECT stack_id, project_id FROM cluster WHERE uuid = ?", c.uuid).Scan(&c.stackID, &project); err != nil {
		return fmt.Errorf("cluster %s: %w", spec.name, err)
	}
	c.namespace = capiHelmNamespace(s.namespacePrefix, project)
	if err := e.waitMachinesRunning(ctx, c.namespace, c.stackID, machines, completeTimeout); err != nil {
		return fmt.Errorf("cluster %s: %w", spec.name, err)
	}
	c.toMachinesRunning = time.Since(cast)
	fmt.Printf("# %s: %s all %d Machines Running %.1f s after cluster_create\n", s.name, spec.name, machines, c.toMachinesRunning.Seconds())
	return nil
}

// castNodeGroupCreate sends nodegroup_create as magnum-api 23.0.0 does for `openstack coe nodegroup
// create <cluster> <name> --node-count <n>` (nodegroup.py post): the cluster as read from the
// database with its template and no changes, and a NodeGroup 1.2 the API built and did not save —
// the conductor inserts the row. It returns the node group's uuid.
func (e *benchEnv) castNodeGroupCreate(ctx context.Context, s *side, clusterUUID, name string, nodeCount int64) (string, error) {
	store, err := db.Open(ctx, s.dbURL)
	if err != nil {
		return "", err
	}
	defer store.Close()
	row, err := store.GetCluster(ctx, clusterUUID)
	if err != nil {
		return "", err
	}
	cl := row.View()
	if row.ClusterTemplateID == nil {
		return "", fmt.Errorf("cluster %s has no template", clusterUUID)
	}
	tmpl, err := store.GetClusterTemplate(ctx, *row.ClusterTemplateID)
	if err != nil {
		return "", err
	}
	cl.ClusterTemplate.Set(tmpl.View())
	magnum.ResetChanges(cl)
	image, _ := tmpl.View().ImageID.Get()
	ng := &magnum.NodeGroup{}
	id := uuid.NewString()
	ng.UUID.Set(id)
	ng.Name.Set(name)
	ng.ClusterID.Set(clusterUUID)
	ng.ProjectID.Set(e.token.projectID)
	// The API's defaults: the cluster's flavor, labels and template image; role worker, no maximum.
	ng.FlavorID.Set(cl.FlavorID.Or(""))
	ng.ImageID.Set(image)
	ng.Labels.Set(cl.Labels.Or(magnum.Dict{}))
	ng.NodeCount.Set(nodeCount)
	ng.Role.Set("worker")
	ng.MinNodeCount.Set(0)
	ng.MaxNodeCount.SetNull()
	vs := magnum.NewVersions(magnum.Versions23)
	clusterObj, err := magnum.Encode(cl, vs)
	if err != nil {
		return "", err
	}
	ngObj, err := magnum.Encode(ng, vs)
	if err != nil {
		return "", err
	}
	return id, s.rpc.Cast(ctx, "nodegroup_create", map[string]any{"cluster": clusterObj, "nodegroup": ngObj}, e.token.context())
}

// waitClusterStatus waits until the cluster's row has the status; a *_FAILED status, the row's
// disappearance or the timeout is an error.
func waitClusterStatus(ctx context.Context, s *side, clusterUUID string, want magnum.ClusterStatus, timeout time.Duration) error {
	return waitStatus(ctx, s, timeout, string(want), "cluster", "SELECT status, status_reason FROM cluster WHERE uuid = ?", clusterUUID)
}

// waitNodeGroupStatus is waitClusterStatus for a node group.
func waitNodeGroupStatus(ctx context.Context, s *side, clusterUUID, nodeGroupUUID string, want magnum.ClusterStatus, timeout time.Duration) error {
	return waitStatus(ctx, s, timeout, string(want), "node group",
		"SELECT status, status_reason FROM nodegroup WHERE cluster_id = ? AND uuid = ?", clusterUUID, nodeGroupUUID)
}

func waitStatus(ctx context.Context, s *side, timeout time.Duration, want, what, query string, args ...any) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		var status, reason *string
		err := s.db.QueryRowContext(ctx, query, args...).Scan(&status, &reason)
		switch {
		case err == nil && status != nil:
			last = *status
			if reason != nil && *reason != "" {
				last += " (" + *reason + ")"
			}
			if *status == want {
				return nil
			}
			if strings.HasSuffix(*status, "_FAILED") {
				return fmt.Errorf("%s is %s, not %s", what, last, want)
			}
		case err != nil && last != "":
			return fmt.Errorf("%s row gone (last %s): %v", what, last, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not %s within %s (last %q)", what, want, timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitMachinesRunning waits until the CAPI cluster has that many Machines, all Running (a Node
// matched, i.e. booted by the OpenStack simulator and given its provider ID).
func (e *benchEnv) waitMachinesRunning(ctx context.Context, namespace, clusterName string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var phases []string
	for {
		var list clusterv1.MachineList
		err := e.kube.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})
		if err == nil {
			phases = phases[:0]
			running := 0
			for _, m := range list.Items {
				phases = append(phases, m.Name+" "+m.Status.Phase)
				if m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
					running++
				}
			}
			if running == want && len(list.Items) == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CAPI cluster %s/%s: not %d Machines Running within %s (%s)", namespace, clusterName, want, timeout, strings.Join(phases, ", "))
		}
		time.Sleep(2 * time.Second)
	}
}

// logTail is the end of the side's log, for failures.
func (s *side) logTail(n int) string {
	if s.logPath == "" {
		return ""
	}
	return fmt.Sprintf("%s's log (%s), last %d lines:\n%s", s.name, s.logPath, n, tail(s.logPath, n))
}

// cleanupClustersAtEnd removes, when the test ends, what the clusters of a namespace prefix left in
// the management cluster and Keystone, whichever conductor holds them by then: their CAPI Clusters
// (Cluster API and CAPO delete the machines and the cloud resources, with the credentials still
// there), then the tenant's application credentials their Secrets name, then the namespaces.
func (e *benchEnv) cleanupClustersAtEnd(tb testing.TB, prefix string) {
	tb.Cleanup(func() {
		ctx := context.Background()
		var nsList corev1.NamespaceList
		if err := e.kube.List(ctx, &nsList); err != nil {
			tb.Logf("cleanup %s: %v", prefix, err)
			return
		}
		var namespaces []corev1.Namespace
		for _, ns := range nsList.Items {
			if strings.HasPrefix(ns.Name, prefix) {
				namespaces = append(namespaces, ns)
			}
		}
		for _, ns := range namespaces {
			if err := e.kube.DeleteAllOf(ctx, &clusterv1.Cluster{}, client.InNamespace(ns.Name)); err != nil {
				tb.Logf("cleanup: delete the CAPI Clusters of %s: %v", ns.Name, err)
			}
		}
		t0 := time.Now()
		deadline := t0.Add(5 * time.Minute)
		for _, ns := range namespaces {
			for {
				var left clusterv1.ClusterList
				if err := e.kube.List(ctx, &left, client.InNamespace(ns.Name)); err != nil || len(left.Items) == 0 {
					if took := time.Since(t0); took > 5*time.Second {
						fmt.Printf("# cleanup: CAPI Clusters of %s deleted in %.0f s\n", ns.Name, took.Seconds())
					}
					break
				}
				if time.Now().After(deadline) {
					// Deleting the namespace anyway leaves it Terminating until they go.
					tb.Logf("cleanup: %d CAPI Clusters of %s still there after %s", len(left.Items), ns.Name, time.Since(t0).Round(time.Second))
					break
				}
				time.Sleep(2 * time.Second)
			}
			e.deleteApplicationCredentials(ctx, tb, ns.Name)
			if err := e.kube.Delete(ctx, &ns); err != nil {
				tb.Logf("cleanup: delete namespace %s: %v", ns.Name, err)
			}
		}
	})
}

// deleteApplicationCredentials deletes the tenant's application credentials that the namespace's
// Secrets hold (clouds.yaml of magnum-capi-helm and the bridge); those already gone are fine.
func (e *benchEnv) deleteApplicationCredentials(ctx context.Context, tb testing.TB, namespace string) {
	var secrets corev1.SecretList
	if err := e.kube.List(ctx, &secrets, client.InNamespace(namespace)); err != nil {
		return
	}
	for _, sec := range secrets.Items {
		for _, id := range credentialIDs(sec.Data["clouds.yaml"]) {
			url := fmt.Sprintf("%s/users/%s/application_credentials/%s", keystoneURL, e.token.userID, id)
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, &bytes.Buffer{})
			if err != nil {
				continue
			}
			req.Header.Set("X-Auth-Token", e.token.id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				tb.Logf("cleanup: delete application credential %s: %v", id, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
				tb.Logf("cleanup: delete application credential %s: %s", id, resp.Status)
			}
		}
	}
}

// credentialIDs are the application credentials a clouds.yaml names.
func credentialIDs(cloudsYAML []byte) []string {
	var clouds struct {
		Clouds map[string]struct {
			Auth struct {
				ID string `json:"application_credential_id"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	if yaml.Unmarshal(cloudsYAML, &clouds) != nil {
		return nil
	}
	var ids []string
	for _, cloud := range clouds.Clouds {
		if cloud.Auth.ID != "" {
			ids = append(ids, cloud.Auth.ID)
		}
	}
	return ids
}
