package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack/boot"
)

// The local stack's OpenStack simulator (deploy/local/openstack, docs/openstack-simulator.md): the
// catalog's Nova and Neutron, and its inspection API.
var (
	simulatorCompute = testutil.Env("MCB_FAKE_COMPUTE_URL", "http://127.0.0.1:8774/v2.1")
	simulatorNetwork = testutil.Env("MCB_FAKE_NETWORK_URL", "http://127.0.0.1:9696/v2.0")
	simulatorInspect = testutil.Env("MCB_FAKE_INSPECT_URL", "http://127.0.0.1:9877")
	// Octavia; the simulator serves it under /v2/ as well as /v2.0/.
	simulatorLoadBalancer = testutil.Env("MCB_FAKE_LOAD_BALANCER_URL", "http://127.0.0.1:9876/v2")
)

// TestOpenStackFlavorOnTheSimulator: a template with capi_infrastructure=openstack makes the real CAPO
// controllers build the cluster in the tenant's project of the OpenStack simulator — network,
// subnet, router, security groups, the API floating IP, a server per machine with the template's
// flavor, image, keypair, availability zone, server group and user-data. The simulator boots each
// server's kubeadm user data into a node of a simulated workload cluster answering on the API
// floating IP, so the create completes. Then: credential_rotate (CAPO's next requests carry the new
// application credential; the old one is refused), a node group create (one more server), a resize
// with nodes_to_remove (exactly that server goes), the node group's delete, and the cluster's delete,
// which leaves the project as it found it and takes the cluster's application credentials with it.
func TestOpenStackFlavorOnTheSimulator(t *testing.T) {
	requireStack(t)
	t.Parallel()
	tok := demoToken(t)
	before := projectResources(t, tok.ProjectID)
	t.Logf("project %s before: %v", tok.ProjectID, before)

	tmpl := createTemplate(t, cloudDemo, "--labels", "capi_infrastructure=openstack,availability_zone=nova,server_group_policies=anti-affinity")
	start := time.Now()
	name := "os-" + testutil.RandomHex(3)
	id := createCluster(t, cloudDemo, tmpl, name, "--node-count", "1", "--timeout", "15")

	// What CAPO built, read from the simulator (not from CAPI objects).
	var servers []simServer
	require.Eventually(t, func() bool {
		servers = projectServers(t, tok.ID)
		return len(servers) > 0
	}, 4*time.Minute, 2*time.Second, "no server in the simulator; resources: %v", projectResources(t, tok.ProjectID))
	timed(t, "openstack: create → first server ACTIVE in the simulator", start)
	res := projectResources(t, tok.ProjectID)
	t.Logf("project %s after the create: %v", tok.ProjectID, res)
	for _, coll := range []string{"networks", "subnets", "routers", "security-groups", "floatingips", "ports", "servers", "server-groups"} {
		require.NotEmpty(t, res[coll], "CAPO made no %s: %v", coll, res)
	}

	// Security groups: CAPO's managed control-plane and worker groups, with the API port open.
	var groups struct {
		SecurityGroups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Direction    string `json:"direction"`
				Protocol     string `json:"protocol"`
				PortRangeMin *int   `json:"port_range_min"`
			} `json:"security_group_rules"`
		} `json:"security_groups"`
	}
	simulatorGET(t, tok.ID, simulatorNetwork+"/security-groups", &groups)
	var apiOpen bool
	var groupNames []string
	for _, g := range groups.SecurityGroups {
		groupNames = append(groupNames, g.Name)
		for _, r := range g.Rules {
			if r.Direction == "ingress" && r.Protocol == "tcp" && r.PortRangeMin != nil && *r.PortRangeMin == 6443 {
				apiOpen = true
			}
		}
	}
	require.True(t, slices.ContainsFunc(groupNames, func(n string) bool { return strings.HasSuffix(n, "-secgroup-controlplane") }), "%v", groupNames)
	require.True(t, slices.ContainsFunc(groupNames, func(n string) bool { return strings.HasSuffix(n, "-secgroup-worker") }), "%v", groupNames)
	require.True(t, apiOpen, "no security group opens the API port 6443: %v", groupNames)

	// Every server boots: the create completes.
	c := waitStatus(t, cloudDemo, id, 12*time.Minute, "CREATE_COMPLETE")
	timed(t, "openstack: create → CREATE_COMPLETE", start)
	requireNodesAreServers(t, tok.ID, id)

	// One server per machine that has its bootstrap data, with what the template and its labels
	// asked for.
	booted := func() []string {
		var names []string
		for _, m := range clusterMachines(t, id) {
			if m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName != "" {
				names = append(names, m.Name)
			}
		}
		return names
	}
	require.Eventually(t, func() bool {
		servers = projectServers(t, tok.ID)
		want := booted()
		return len(want) > 0 && !slices.ContainsFunc(want, func(name string) bool {
			return !slices.ContainsFunc(servers, func(s simServer) bool { return s.Name == name })
		})
	}, 2*time.Minute, 2*time.Second, "a server per machine with bootstrap data")
	var serverGroups struct {
		Groups []struct {
			Name     string   `json:"name"`
			Policies []string `json:"policies"`
			Members  []string `json:"members"`
		} `json:"server_groups"`
	}
	simulatorGET(t, tok.ID, simulatorCompute+"/os-server-groups", &serverGroups)
	controlPlane := map[string]bool{}
	for _, m := range clusterMachines(t, id) {
		_, controlPlane[m.Name] = m.Labels[clusterv1.MachineControlPlaneLabel]
	}
	for _, s := range servers {
		t.Logf("server %s: flavor %s, image %s, key %s, AZ %s, metadata %v", s.Name, s.Flavor.ID, s.Image.ID, s.KeyName, s.AvailabilityZone, s.Metadata)
		require.Equal(t, "ACTIVE", s.Status)
		require.Equal(t, "default", s.KeyName, s.Name)
		require.Equal(t, "nova", s.AvailabilityZone, s.Name)
		require.NotEmpty(t, s.Image.ID, s.Name)
		// CAPO names a server after its OpenStackMachine, which CAPI names after the Machine.
		isControlPlane, ok := controlPlane[s.Name]
		require.True(t, ok, "server %s is no machine's (machines: %v)", s.Name, controlPlane)
		want := map[bool]string{true: "3", false: "2"}[isControlPlane] // m1.medium, m1.small
		require.Equal(t, want, s.Flavor.ID, "flavor of %s", s.Name)
		var inGroup string
		for _, g := range serverGroups.Groups {
			if slices.Contains(g.Members, s.ID) {
				inGroup = g.Name
				require.Equal(t, []string{"anti-affinity"}, g.Policies, "server group %s", g.Name)
			}
		}
		require.NotEmpty(t, inGroup, "server %s is in no server group: %+v", s.Name, serverGroups.Groups)
		userData, err := base64.StdEncoding.DecodeString(s.UserData)
		require.NoError(t, err)
		require.Contains(t, string(userData), "cloud-provider", "user-data of %s", s.Name)
		require.Contains(t, string(userData), "external", "user-data of %s", s.Name)
		// What kubeadm makes of it, read as cloud-init and kubeadm would.
		node, err := boot.Parse(s.UserData, boot.Server{ID: s.ID, Name: s.Name})
		require.NoError(t, err, "user-data of %s", s.Name)
		require.Equal(t, isControlPlane, node.Role != boot.RoleJoinWorker, "kubeadm role of %s: %s", s.Name, node.Role)
		require.Equal(t, "openstack:///"+s.ID, node.ProviderID, s.Name)
		require.Equal(t, strings.TrimPrefix(strings.TrimSuffix(c.APIAddress, "/"), "https://"), node.Endpoint, s.Name)
	}
	// An operator reads the same with the OpenStack CLI.
	for _, args := range [][]string{{"server", "list"}, {"network", "list"}, {"security", "group", "list"}, {"floating", "ip", "list"}} {
		out := mustOpenstack(t, cloudDemo, append(args, "-f", "value", "-c", "ID")...)
		require.NotEmpty(t, strings.TrimSpace(out), "openstack %s", strings.Join(args, " "))
	}

	// credential_rotate: the old CAPO credential stops working, and what CAPO asks the cloud for
	// next (the node group below) it asks with the new one.
	ns := templates.NamespaceFor("magnum-", c.ProjectID)
	oldCAPO := secretData(t, ns, c.StackID+"-cloud-config")
	oldID, newID := credentialID(t, "magnum-"+id+"-capo"), ""
	require.True(t, slices.ContainsFunc(simulatorRequests(t, tok.ProjectID), func(r fakeopenstack.Request) bool {
		return r.ApplicationCredentialID == oldID
	}), "CAPO built the cluster with its application credential %s", oldID)
	rotateCredentials(t, id, c)
	newID = credentialID(t, "magnum-"+id+"-capo-r1")
	_, err := issueToken(t, oldCAPO["clouds.yaml"])
	require.Error(t, err, "the rotated-out CAPO credential still works")
	rotated := time.Now()

	// A node group: one more server, booted into one more node.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "create", id, "extra", "--node-count", "2")
	waitNodeGroup(t, id, "extra", "CREATE_COMPLETE")
	waitStatus(t, cloudDemo, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "openstack: nodegroup create (2 nodes) → CREATE_COMPLETE", start)
	extra := func() []simServer {
		return slices.DeleteFunc(projectServers(t, tok.ID), func(s simServer) bool { return !strings.Contains(s.Name, "-extra-") })
	}
	require.Len(t, extra(), 2, "the node group's servers")
	requireNodesAreServers(t, tok.ID, id)
	var withNew, withOld int
	for _, r := range simulatorRequests(t, tok.ProjectID) {
		if r.Time.After(rotated) && r.Method == http.MethodPost && r.Path == "/v2.1/servers" {
			switch r.ApplicationCredentialID {
			case newID:
				withNew++
			case oldID:
				withOld++
			}
		}
	}
	require.Equal(t, 2, withNew, "CAPO created the node group's servers with the rotated credential %s", newID)
	require.Zero(t, withOld, "a server created with the rotated-out credential")

	// Resize with nodes_to_remove: exactly that server goes.
	victim := extra()[0]
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", id, "1", "--nodegroup", "extra", "--nodes-to-remove", victim.Name)
	waitNodeGroup(t, id, "extra", "UPDATE_COMPLETE")
	waitStatus(t, cloudDemo, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "openstack: resize extra 1 --nodes-to-remove → UPDATE_COMPLETE", start)
	left := extra()
	require.Len(t, left, 1)
	require.NotEqual(t, victim.ID, left[0].ID, "the named server is the one removed")
	requireNodesAreServers(t, tok.ID, id)

	// The node group's delete takes its server.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "delete", id, "extra")
	require.Eventually(t, func() bool {
		_, err := showNodeGroup(t, id, "extra")
		return err != nil && len(extra()) == 0
	}, 5*time.Minute, 3*time.Second, "the node group and its server are gone")
	timed(t, "openstack: nodegroup delete → gone", start)
	requireNodesAreServers(t, tok.ID, id)

	// The delete leaves nothing of the cluster in the project, nor its credentials.
	require.NotEmpty(t, credentialNames(t, id))
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	waitGone(t, cloudDemo, id, 5*time.Minute)
	timed(t, "openstack: delete → gone", start)
	require.Equal(t, before, projectResources(t, tok.ProjectID), "the delete left resources in the project")
	require.Empty(t, credentialNames(t, id))
	require.Empty(t, capiObjects(t, id))
}

// TestOpenStackQuotaRefusalIsNamed: with Nova's instances quota at 0 the control plane's server is
// refused; the create fails at its create_timeout with Nova's own message (CAPO keeps it on its
// OpenStackServer, not on the Machine), and the delete releases the API floating IP that CAPO
// allocated and, with no server to detach it from, would leave behind.
func TestOpenStackQuotaRefusalIsNamed(t *testing.T) {
	requireStack(t)
	t.Parallel()
	alt := tokenOf(t, cloudAlt)
	mustOpenstack(t, cloudAdmin, "quota", "set", "--instances", "0", alt.ProjectID)
	t.Cleanup(func() { _, _ = openstack(t, cloudAdmin, "quota", "set", "--instances", "50", alt.ProjectID) })
	before := projectResources(t, alt.ProjectID)

	tmpl := createTemplate(t, cloudAlt, "--labels", "capi_infrastructure=openstack")
	start := time.Now()
	id := createCluster(t, cloudAlt, tmpl, "osq-"+testutil.RandomHex(3), "--node-count", "1", "--timeout", "2")
	c := waitStatus(t, cloudAlt, id, 6*time.Minute, "CREATE_FAILED")
	timed(t, "openstack: create over Nova's quota → CREATE_FAILED (create_timeout 2 min)", start)
	t.Logf("status_reason: %s", c.StatusReason)
	require.Contains(t, c.StatusReason, "create_timeout of 2m0s")
	require.Contains(t, c.StatusReason, "Quota exceeded for instances: Requested 1, but already used 0 of 0 instances")
	require.NotEmpty(t, projectResources(t, alt.ProjectID)["floatingips"], "CAPO allocated the API floating IP")

	mustOpenstack(t, cloudAlt, "coe", "cluster", "delete", id)
	waitGone(t, cloudAlt, id, 5*time.Minute)
	require.Equal(t, before, projectResources(t, alt.ProjectID), "the delete left resources in the project")
}

// TestOpenStackNodesThatNeverJoinAreNamed: servers whose image never boots stay ACTIVE with no node
// (the local stack's image ubuntu-2404-kube-v1.36.3-noboot); the create fails at its create_timeout
// naming the machines provisioned without a node — what an operator sees when an image does not boot —
// and the delete leaves the project as it found it. (The admin project, after the load balancer
// test's cluster is gone: each compares its whole project before and after.)
func TestOpenStackNodesThatNeverJoinAreNamed(t *testing.T) {
	cloud := cloudAdmin
	tok := adminProjectAlone(t)
	before := projectResources(t, tok.ProjectID)
	tmpl := createTemplateWithImage(t, cloud, "ubuntu-2404-kube-v1.36.3-noboot", "--labels", "capi_infrastructure=openstack")
	start := time.Now()
	id := createCluster(t, cloud, tmpl, "osnb-"+testutil.RandomHex(3), "--node-count", "1", "--timeout", "3")
	c := waitStatus(t, cloud, id, 7*time.Minute, "CREATE_FAILED")
	timed(t, "openstack: create, nodes never join → CREATE_FAILED (create_timeout 3 min)", start)
	t.Logf("status_reason: %s", c.StatusReason)
	require.Contains(t, c.StatusReason, "create_timeout")
	named := 0
	for _, m := range clusterMachines(t, id) {
		if m.Status.NodeRef.Name == "" && conditionIs(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionTrue) {
			require.Contains(t, c.StatusReason, m.Name, "the reason names the machine provisioned without a node")
			named++
		}
	}
	require.NotZero(t, named, "no machine has a server without a node: %s", c.StatusReason)
	require.NotEmpty(t, projectServers(t, tok.ID), "the servers are there, ACTIVE")

	mustOpenstack(t, cloud, "coe", "cluster", "delete", id)
	waitGone(t, cloud, id, 5*time.Minute)
	require.Equal(t, before, projectResources(t, tok.ProjectID), "the delete left resources in the project")
}

// adminProject serialises the OpenStack-flavor tests that compare the admin project's resources
// before and after.
var adminProject sync.Mutex

// adminProjectAlone starts a parallel test that has the admin project to itself until its cleanups
// (its cluster's delete among them) have run.
func adminProjectAlone(t *testing.T) testutil.Token {
	t.Helper()
	requireStack(t)
	t.Parallel()
	adminProject.Lock()
	t.Cleanup(adminProject.Unlock) // registered first, so run last
	return tokenOf(t, cloudAdmin)
}

// requireNodesAreServers: the workload cluster's nodes are exactly the project's servers (the
// kubelet registers the server's name, lowercased). The kubeconfig is fetched once and the nodes
// listed until they match: a removed server's Node goes a little after the server, and each
// `coe cluster config` is a CLI run that takes seconds on a loaded machine.
func requireNodesAreServers(t *testing.T, token, clusterUUID string) {
	t.Helper()
	// The cluster's servers: the project may hold other clusters' (the upgrade test's, say).
	c, err := showCluster(t, cloudDemo, clusterUUID)
	require.NoError(t, err)
	require.NotEmpty(t, c.StackID)
	var names []string
	for _, s := range projectServers(t, token) {
		if strings.HasPrefix(strings.ToLower(s.Name), strings.ToLower(c.StackID)+"-") {
			names = append(names, strings.ToLower(s.Name))
		}
	}
	slices.Sort(names)
	kc := workloadKubeconfigIn(t, cloudDemo, clusterUUID)
	var (
		nodes []string
		out   string
	)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if out, err = kubectl(t, kc, "get", "nodes", "-o", "name"); err != nil {
			continue
		}
		nodes = nodes[:0]
		for _, f := range strings.Fields(out) {
			nodes = append(nodes, strings.TrimPrefix(f, "node/"))
		}
		slices.Sort(nodes)
		if slices.Equal(nodes, names) {
			return
		}
	}
	t.Fatalf("the workload cluster's nodes are not the project's servers after 3 minutes: nodes %v, servers %v (last kubectl error: %v %s)", nodes, names, err, out)
}

// simulatorRequests are the simulator's recent requests made with the project's tokens.
func simulatorRequests(t *testing.T, projectID string) []fakeopenstack.Request {
	t.Helper()
	var out struct {
		Requests []fakeopenstack.Request `json:"requests"`
	}
	simulatorGET(t, "", simulatorInspect+"/requests?project_id="+projectID, &out)
	return out.Requests
}

// credentialID is the id of the demo user's application credential of that name.
func credentialID(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(mustOpenstack(t, cloudDemo, "application", "credential", "show", name, "-f", "value", "-c", "id"))
}

type simServer struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Status           string            `json:"status"`
	KeyName          string            `json:"key_name"`
	Metadata         map[string]string `json:"metadata"`
	AvailabilityZone string            `json:"OS-EXT-AZ:availability_zone"`
	UserData         string            `json:"OS-EXT-SRV-ATTR:user_data"`
	Flavor           struct {
		ID string `json:"id"`
	} `json:"flavor"`
	Image struct {
		ID string `json:"id"`
	} `json:"image"`
}

func projectServers(t *testing.T, token string) []simServer {
	t.Helper()
	var out struct {
		Servers []simServer `json:"servers"`
	}
	simulatorGET(t, token, simulatorCompute+"/servers/detail", &out)
	return out.Servers
}

// projectResources are the ids of what the simulator holds for the project, by collection.
func projectResources(t *testing.T, projectID string) map[string][]string {
	t.Helper()
	var out map[string][]string
	simulatorGET(t, "", simulatorInspect+"/projects/"+projectID+"/resources", &out)
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

func simulatorGET(t *testing.T, token, url string, into any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s", url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(into), "GET %s", url)
}

// clusterMachines are the CAPI Machines of a Magnum cluster, found by the bridge's uuid label.
func clusterMachines(t *testing.T, clusterUUID string) []clusterv1.Machine {
	t.Helper()
	var clusters struct {
		Items []clusterv1.Cluster `json:"items"`
	}
	kubectlJSON(t, mgmtKubeconfig, &clusters, "get", "clusters.cluster.x-k8s.io", "-A", "-o", "json", "-l", "magnum.openstack.org/cluster-uuid="+clusterUUID)
	if len(clusters.Items) == 0 {
		return nil
	}
	var l clusterv1.MachineList
	kubectlJSON(t, mgmtKubeconfig, &l, "get", "machines.cluster.x-k8s.io", "-n", clusters.Items[0].Namespace, "-o", "json",
		"-l", fmt.Sprintf("%s=%s", clusterv1.ClusterNameLabel, clusters.Items[0].Name))
	return l.Items
}

// TestOpenStackFixedNetworkAndLoadBalancer: a template naming an existing network and subnet
// (fixed_network, fixed_subnet) with master_lb_enabled makes CAPO put the servers on that network —
// creating no network, subnet or router of its own — and the API behind an Octavia load balancer on
// that subnet: a listener on 6443, a pool whose member is the control-plane server, a health monitor,
// and the API floating IP on the load balancer's VIP. The delete takes the load balancer, servers,
// ports and security groups with it and leaves the tenant's own network alone. (The admin project:
// the other OpenStack-flavor tests compare demo's and alt_demo's whole projects before and after.)
func TestOpenStackFixedNetworkAndLoadBalancer(t *testing.T) {
	cloud := cloudAdmin
	tok := adminProjectAlone(t)
	net, subnet := "e2e-fixed-"+testutil.RandomHex(3), "e2e-fixed-subnet-"+testutil.RandomHex(3)
	netID := strings.TrimSpace(mustOpenstack(t, cloud, "network", "create", net, "-f", "value", "-c", "id"))
	subnetID := strings.TrimSpace(mustOpenstack(t, cloud, "subnet", "create", subnet, "--network", net,
		"--subnet-range", "10.77.0.0/24", "-f", "value", "-c", "id"))
	t.Cleanup(func() { // after the cluster's cleanup (registered later, run first)
		_, _ = openstack(t, cloud, "subnet", "delete", subnetID)
		_, _ = openstack(t, cloud, "network", "delete", netID)
	})
	before := projectResources(t, tok.ProjectID)

	tmpl := createTemplate(t, cloud, "--fixed-network", net, "--fixed-subnet", subnet, "--master-lb-enabled",
		"--labels", "capi_infrastructure=openstack")
	start := time.Now()
	id := createCluster(t, cloud, tmpl, "oslb-"+testutil.RandomHex(3), "--node-count", "1", "--timeout", "20")

	type member struct {
		Address      string `json:"address"`
		ProtocolPort int    `json:"protocol_port"`
	}
	var (
		servers []simServer
		members struct {
			Members []member `json:"members"`
		}
	)
	var pools struct {
		Pools []map[string]any `json:"pools"`
	}
	require.Eventually(t, func() bool {
		servers = projectServers(t, tok.ID)
		if len(servers) == 0 {
			return false
		}
		simulatorGET(t, tok.ID, simulatorLoadBalancer+"/lbaas/pools", &pools)
		if len(pools.Pools) == 0 {
			return false
		}
		simulatorGET(t, tok.ID, simulatorLoadBalancer+"/lbaas/pools/"+str(pools.Pools[0]["id"])+"/members", &members)
		return len(members.Members) > 0
	}, 5*time.Minute, 2*time.Second, "no server with a load balancer member; resources: %v", projectResources(t, tok.ProjectID))
	timed(t, "openstack: create → control-plane server behind the load balancer", start)
	after := projectResources(t, tok.ProjectID)
	t.Logf("project %s after the create: %v", tok.ProjectID, after)

	// No network, subnet or router of CAPO's: the servers are on the tenant's network.
	require.Equal(t, before["networks"], after["networks"], "CAPO made a network though the template names one")
	require.Equal(t, before["subnets"], after["subnets"], "CAPO made a subnet though the template names one")
	require.Equal(t, before["routers"], after["routers"], "CAPO made a router though the template names a network")
	var rawPorts struct {
		Ports []map[string]any `json:"ports"`
	}
	simulatorGET(t, tok.ID, simulatorNetwork+"/ports", &rawPorts)
	serverIP := map[string]string{}
	for _, p := range rawPorts.Ports {
		for _, s := range servers {
			if str(p["device_id"]) != s.ID {
				continue
			}
			require.Equal(t, netID, str(p["network_id"]), "port of server %s", s.Name)
			ips, _ := p["fixed_ips"].([]any)
			require.NotEmpty(t, ips, "port of server %s has no address", s.Name)
			ip, _ := ips[0].(map[string]any)
			require.Equal(t, subnetID, str(ip["subnet_id"]), "port of server %s", s.Name)
			serverIP[s.Name] = str(ip["ip_address"])
		}
	}
	require.Len(t, serverIP, len(servers), "a port per server on the tenant's network: %v", serverIP)

	// The load balancer: on the tenant's subnet, listening on 6443, its pool's member the
	// control-plane server, a health monitor, the API floating IP on its VIP.
	var lbs struct {
		LoadBalancers []struct {
			VipSubnetID        string `json:"vip_subnet_id"`
			VipPortID          string `json:"vip_port_id"`
			ProvisioningStatus string `json:"provisioning_status"`
		} `json:"loadbalancers"`
	}
	simulatorGET(t, tok.ID, simulatorLoadBalancer+"/lbaas/loadbalancers", &lbs)
	require.Len(t, lbs.LoadBalancers, 1, "one load balancer for the API")
	lb := lbs.LoadBalancers[0]
	require.Equal(t, subnetID, lb.VipSubnetID, "the load balancer's VIP is on the tenant's subnet")
	require.Equal(t, "ACTIVE", lb.ProvisioningStatus)
	var listeners struct {
		Listeners []map[string]any `json:"listeners"`
	}
	simulatorGET(t, tok.ID, simulatorLoadBalancer+"/lbaas/listeners", &listeners)
	require.True(t, slices.ContainsFunc(listeners.Listeners, func(l map[string]any) bool {
		port, _ := l["protocol_port"].(float64)
		return port == 6443 && str(l["protocol"]) == "TCP"
	}), "no TCP listener on 6443: %v", listeners.Listeners)
	controlPlane := map[string]bool{}
	for _, m := range clusterMachines(t, id) {
		_, controlPlane[m.Name] = m.Labels[clusterv1.MachineControlPlaneLabel]
	}
	for name, ip := range serverIP {
		if controlPlane[name] {
			require.Contains(t, members.Members, member{Address: ip, ProtocolPort: 6443}, "control-plane server %s is not a member", name)
		}
	}
	var monitors struct {
		HealthMonitors []map[string]any `json:"healthmonitors"`
	}
	simulatorGET(t, tok.ID, simulatorLoadBalancer+"/lbaas/healthmonitors", &monitors)
	require.NotEmpty(t, monitors.HealthMonitors, "no health monitor on the API pool")
	var fips struct {
		FloatingIPs []map[string]any `json:"floatingips"`
	}
	simulatorGET(t, tok.ID, simulatorNetwork+"/floatingips", &fips)
	var apiFIP string
	for _, f := range fips.FloatingIPs {
		if str(f["port_id"]) == lb.VipPortID {
			apiFIP = str(f["floating_ip_address"])
		}
	}
	require.NotEmpty(t, apiFIP, "no floating IP on the load balancer's VIP port %s: %v", lb.VipPortID, fips.FloatingIPs)
	require.Eventually(t, func() bool {
		c, err := showCluster(t, cloud, id)
		return err == nil && strings.Contains(c.APIAddress, apiFIP)
	}, 2*time.Minute, 3*time.Second, "the cluster's api_address is not the load balancer's floating IP %s", apiFIP)

	// The delete (while the create is still under way) leaves the project as it was before.
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "delete", id)
	waitGone(t, cloud, id, 5*time.Minute)
	timed(t, "openstack: delete with a load balancer → gone", start)
	require.Equal(t, before, projectResources(t, tok.ProjectID), "the delete left resources in the project")
}

func str(v any) string { s, _ := v.(string); return s }
