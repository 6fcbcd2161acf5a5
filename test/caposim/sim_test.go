// Package caposim runs Cluster API Provider OpenStack's own service code (v0.14.2,
// pkg/cloud/services/{networking,loadbalancer,compute} and pkg/clients, unmodified) against the
// fake-openstack simulator: what CAPO's OpenStackCluster and OpenStackServer controllers do for a
// cluster with managed networking, managed security groups, an API load balancer with a floating IP
// and a control plane server on a root volume, then their deletions — with CAPO's own Keystone authentication
// (scope.NewProviderClient) as an application credential of the local stack's Keystone.
//
// It is its own module (CAPO's dependency tree stays out of the bridge's go.mod) and talks to a
// fake-openstack binary built from this checkout, started on free ports; only the endpoints of the
// catalog are redirected to it. Needs the local stack's Keystone (clouds.yaml cloud "devstack"), so
// it is the e2e tier, as in the main module (internal/testutil): skipped without the `e2e` build tag,
// and with it a missing Keystone fails it. This module cannot import internal/testutil, hence its
// own requireE2E and tier_*_test.go.
//
//	cd test/caposim && go test -tags e2e ./...
package caposim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/applicationcredentials"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/clients"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/cloud/services/compute"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/cloud/services/loadbalancer"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/cloud/services/networking"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/scope"
	//lint:ignore SA1019 CAPO v0.14's OpenStackCluster.Spec.ControlPlaneEndpoint is a v1beta1 APIEndpoint
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
)

// Identifiers of fake-openstack's default seed (test/fakeopenstack/seed.go).
const (
	publicNetworkID = "9b1c0e7a-0000-4000-8000-0000000000e1"
	imageID         = "2404a136-0003-4000-8000-000000000136"
	flavorMedium    = "3"
	keypair         = "default"
)

// requireE2E skips the test unless it is built with the `e2e` tag (testutil.Require(t, testutil.E2E)
// of the main module).
func requireE2E(t *testing.T) {
	t.Helper()
	if !e2eTag {
		t.Skip("e2e tier: needs the local stack of `make up` (its Keystone); " +
			"run with `cd test/caposim && go test -tags e2e ./...` after `make up`")
	}
}

func unavailable(t *testing.T, why string) {
	t.Helper()
	t.Fatalf("%s (the e2e tier needs the local stack: `make up`)", why)
}

// freeAddrs is n distinct free loopback addresses: every listener stays open until all are taken,
// or the kernel may hand the same port out twice.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// simulator builds cmd/fake-openstack from this checkout and starts it on free ports.
type simulator struct {
	image, compute, network, lb, volume, inspect string
	// project is where Cinder's catalog URL points (it names the project).
	project string
}

func startSimulator(t *testing.T, keystoneURL string) simulator {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fake-openstack")
	build := exec.Command("go", "build", "-o", bin, "./cmd/fake-openstack")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building fake-openstack: %v\n%s", err, out)
	}
	a := freeAddrs(t, 6)
	s := simulator{image: a[0], compute: a[1], network: a[2], lb: a[3], volume: a[4], inspect: a[5]}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--image-listen", s.image, "--compute-listen", s.compute, "--network-listen", s.network,
		"--load-balancer-listen", s.lb, "--volume-listen", s.volume, "--inspect-listen", s.inspect, "--keystone-url", keystoneURL)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("fake-openstack stderr:\n%s", stderr.String())
		}
	})
	for range 100 {
		if resp, err := http.Get("http://" + s.inspect + "/requests"); err == nil {
			resp.Body.Close()
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("fake-openstack did not start: %s", stderr.String())
	return s
}

// locate redirects the catalog's endpoints to the simulator, as an operator's catalog would list it.
func (s *simulator) locate(opts gophercloud.EndpointOpts) (string, error) {
	switch opts.Type {
	case "compute":
		return "http://" + s.compute + "/v2.1/", nil
	case "network":
		return "http://" + s.network + "/", nil
	case "image":
		return "http://" + s.image + "/", nil
	case "load-balancer":
		return "http://" + s.lb + "/", nil
	case "block-storage":
		return "http://" + s.volume + "/v3/" + s.project + "/", nil
	}
	return "", fmt.Errorf("the simulator has no %q service", opts.Type)
}

func (s simulator) resources(t *testing.T, project string) map[string][]string {
	t.Helper()
	resp, err := http.Get("http://" + s.inspect + "/projects/" + project + "/resources")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string][]string{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

type request struct {
	Method, Path            string
	Status                  int
	ProjectID               string `json:"project_id"`
	ApplicationCredentialID string `json:"application_credential_id"`
}

func (s simulator) requests(t *testing.T) []request {
	t.Helper()
	resp, err := http.Get("http://" + s.inspect + "/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Requests []request }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Requests
}

// capoScope is CAPO's scope.Scope over a provider client CAPO itself authenticated.
type capoScope struct {
	provider *gophercloud.ProviderClient
	opts     *clientconfig.ClientOpts
	project  string
}

func (s capoScope) NewComputeClient() (clients.ComputeClient, error) {
	return clients.NewComputeClient(s.provider, s.opts)
}
func (s capoScope) NewVolumeClient() (clients.VolumeClient, error) {
	return clients.NewVolumeClient(s.provider, s.opts)
}
func (s capoScope) NewImageClient() (clients.ImageClient, error) {
	return clients.NewImageClient(s.provider, s.opts)
}
func (s capoScope) NewNetworkClient() (clients.NetworkClient, error) {
	return clients.NewNetworkClient(s.provider, s.opts)
}
func (s capoScope) NewLbClient() (clients.LbClient, error) {
	return clients.NewLbClient(s.provider, s.opts)
}
func (s capoScope) ProjectID() string { return s.project }
func (s capoScope) ExtractToken() (*tokens.Token, error) {
	return nil, fmt.Errorf("not needed by the services under test")
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestCAPOServicesAgainstTheSimulator(t *testing.T) {
	requireE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cloud, err := clientconfig.GetCloudFromYAML(&clientconfig.ClientOpts{Cloud: "devstack"})
	if err != nil {
		unavailable(t, fmt.Sprintf("no cloud devstack in clouds.yaml (written by deploy/local/openstack/up.sh): %v", err))
	}
	authOpts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{Cloud: "devstack"})
	must(t, "auth options", err)
	demo, err := openstack.AuthenticatedClient(ctx, *authOpts)
	if err != nil {
		unavailable(t, fmt.Sprintf("Keystone at %s does not authenticate demo (start the local stack with `make up`): %v", cloud.AuthInfo.AuthURL, err))
	}
	identity, err := openstack.NewIdentityV3(demo, gophercloud.EndpointOpts{})
	must(t, "identity client", err)
	user, err := tokens.Get(ctx, identity, demo.Token()).ExtractUser()
	must(t, "token user", err)
	appCred, err := applicationcredentials.Create(ctx, identity, user.ID, applicationcredentials.CreateOpts{
		Name: fmt.Sprintf("caposim-%d", time.Now().UnixNano()), Description: "test/caposim: CAPO against fake-openstack",
	}).Extract()
	must(t, "application credential", err)
	t.Cleanup(func() {
		if err := applicationcredentials.Delete(context.Background(), identity, user.ID, appCred.ID).ExtractErr(); err != nil {
			t.Errorf("deleting the test's application credential: %v", err)
		}
	})

	sim := startSimulator(t, cloud.AuthInfo.AuthURL)
	// CAPO authenticates the way it does from the clouds.yaml the bridge stores for a cluster.
	capoCloud := clientconfig.Cloud{AuthType: clientconfig.AuthV3ApplicationCredential, RegionName: cloud.RegionName,
		AuthInfo: &clientconfig.AuthInfo{AuthURL: cloud.AuthInfo.AuthURL, ApplicationCredentialID: appCred.ID,
			ApplicationCredentialSecret: appCred.Secret}}
	provider, clientOpts, projectID, err := scope.NewProviderClient(capoCloud, cloud.RegionName, nil, testr.New(t))
	must(t, "CAPO's provider client", err)
	sim.project = projectID
	provider.EndpointLocator = sim.locate
	sc := scope.NewWithLogger(capoScope{provider: provider, opts: clientOpts, project: projectID}, testr.New(t))

	clusterResourceName := "magnum-caposim-demo"
	tags := []string{"magnum-cluster-caposim"}
	osc := &infrav1.OpenStackCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "magnum-caposim"},
		Spec: infrav1.OpenStackClusterSpec{
			ManagedSubnets:        []infrav1.SubnetSpec{{CIDR: "10.6.0.0/24", DNSNameservers: []string{"8.8.8.8"}}},
			ExternalNetwork:       &infrav1.NetworkParam{ID: ptr.To(publicNetworkID)},
			ManagedSecurityGroups: &infrav1.ManagedSecurityGroups{AllowAllInClusterTraffic: true},
			APIServerLoadBalancer: &infrav1.APIServerLoadBalancer{Enabled: ptr.To(true)},
			Tags:                  tags,
		},
	}

	// OpenStackCluster reconcile: external network, network, subnet, router, security groups, LB+FIP.
	net, err := networking.NewService(sc)
	must(t, "networking service", err)
	must(t, "ReconcileExternalNetwork", net.ReconcileExternalNetwork(osc))
	must(t, "ReconcileNetwork", net.ReconcileNetwork(osc, clusterResourceName))
	must(t, "ReconcileSubnet", net.ReconcileSubnet(osc, clusterResourceName))
	must(t, "ReconcileRouter", net.ReconcileRouter(osc, clusterResourceName))
	must(t, "ReconcileSecurityGroups", net.ReconcileSecurityGroups(osc, clusterResourceName))
	// A second reconcile finds everything (the counts below show nothing was made twice).
	must(t, "ReconcileNetwork again", net.ReconcileNetwork(osc, clusterResourceName))
	must(t, "ReconcileSubnet again", net.ReconcileSubnet(osc, clusterResourceName))
	must(t, "ReconcileRouter again", net.ReconcileRouter(osc, clusterResourceName))
	must(t, "ReconcileSecurityGroups again", net.ReconcileSecurityGroups(osc, clusterResourceName))
	// The controller's resolveLoadBalancerNetwork: without spec.apiServerLoadBalancer.network, the
	// cluster network.
	osc.Status.APIServerLoadBalancer = &infrav1.LoadBalancer{LoadBalancerNetwork: osc.Status.Network.DeepCopy()}
	lbs, err := loadbalancer.NewService(sc)
	must(t, "load balancer service", err)
	_, err = lbs.ReconcileLoadBalancer(osc, clusterResourceName, 6443)
	must(t, "ReconcileLoadBalancer", err)
	if osc.Status.APIServerLoadBalancer.IP == "" || osc.Status.APIServerLoadBalancer.InternalIP == "" {
		t.Fatalf("the load balancer has no floating and internal IP: %+v", osc.Status.APIServerLoadBalancer)
	}
	osc.Spec.ControlPlaneEndpoint = &clusterv1beta1.APIEndpoint{Host: osc.Status.APIServerLoadBalancer.IP, Port: 6443}
	if osc.Status.Router == nil || len(osc.Status.Router.IPs) == 0 || osc.Status.ControlPlaneSecurityGroup == nil || osc.Status.WorkerSecurityGroup == nil {
		t.Fatalf("cluster status incomplete: router %+v, control plane group %+v", osc.Status.Router, osc.Status.ControlPlaneSecurityGroup)
	}

	// OpenStackServer reconcile: ports with the managed control plane group, then the server.
	machineName := "magnum-caposim-demo-control-plane-abcde"
	portSpecs, err := net.ConstructPorts(nil, nil, false, clusterResourceName, machineName, osc.Status.Network,
		&osc.Status.ControlPlaneSecurityGroup.ID, tags)
	must(t, "ConstructPorts", err)
	resources := &infrav1alpha1.ServerResources{}
	must(t, "EnsurePorts", net.EnsurePorts(osc, portSpecs, resources))
	must(t, "EnsurePorts again", net.EnsurePorts(osc, portSpecs, resources))
	if len(resources.Ports) != 1 {
		t.Fatalf("ports: %+v", resources.Ports)
	}
	computeService, err := compute.NewService(sc)
	must(t, "compute service", err)
	zones, err := computeService.GetAvailabilityZones()
	must(t, "GetAvailabilityZones", err)
	if len(zones) != 1 || zones[0].ZoneName != "nova" {
		t.Errorf("availability zones: %+v", zones)
	}
	flavorID, err := computeService.GetFlavorID(nil, ptr.To("m1.medium"))
	must(t, "GetFlavorID", err)
	if flavorID != flavorMedium {
		t.Errorf("flavor m1.medium resolved to %q", flavorID)
	}
	// The bridge creates the node group's server group (internal/compute); CAPO only references it.
	computeClient, err := openstack.NewComputeV2(provider, gophercloud.EndpointOpts{})
	must(t, "compute client", err)
	group, err := servergroups.Create(ctx, computeClient, servergroups.CreateOpts{Name: "caposim-control-plane",
		Policies: []string{"anti-affinity"}}).Extract()
	must(t, "server group", err)
	userData := "#cloud-config\n# kubeadm: cloud-provider=external\n"
	instance, err := computeService.CreateInstance(osc, &compute.InstanceSpec{
		Name: machineName, ImageID: imageID, FlavorID: flavorID, SSHKeyName: keypair, UserData: userData,
		Metadata: map[string]string{"magnum_nodegroup": "default-master"}, FailureDomain: "nova", Tags: tags,
		ServerGroupID: group.ID, RootVolume: &infrav1.RootVolume{SizeGiB: 25},
	}, []string{resources.Ports[0].ID})
	must(t, "CreateInstance", err)
	group, err = servergroups.Get(ctx, computeClient, group.ID).Extract()
	must(t, "server group", err)
	if len(group.Members) != 1 || group.Members[0] != instance.ID() {
		t.Errorf("server group members %v, want [%s]", group.Members, instance.ID())
	}

	// Nova's instance quota, set by an admin, refuses the next server with Nova's message, which
	// CAPO passes on.
	adminOpts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{Cloud: "devstack-admin"})
	must(t, "admin auth options", err)
	admin, err := openstack.AuthenticatedClient(ctx, *adminOpts)
	must(t, "admin token", err)
	admin.EndpointLocator = sim.locate
	adminCompute, err := openstack.NewComputeV2(admin, gophercloud.EndpointOpts{})
	must(t, "admin compute client", err)
	_, err = quotasets.Update(ctx, adminCompute, projectID, quotasets.UpdateOpts{Instances: ptr.To(1)}).Extract()
	must(t, "quota", err)
	spare := portSpecs[0]
	spare.Name = machineName + "-spare"
	sparePort, err := net.EnsurePort(osc, &spare, infrav1.PortStatus{})
	must(t, "spare port", err)
	_, err = computeService.CreateInstance(osc, &compute.InstanceSpec{Name: machineName + "-2", ImageID: imageID,
		FlavorID: flavorID}, []string{sparePort.ID})
	if err == nil || !strings.Contains(err.Error(), "Quota exceeded for instances: Requested 1, but already used 1 of 1 instances") {
		t.Errorf("a second server past the quota of 1: %v", err)
	}
	must(t, "DeletePort spare", net.DeletePort(osc, sparePort.ID))
	status, err := computeService.GetInstanceStatusByName(osc, machineName)
	must(t, "GetInstanceStatusByName", err)
	if status == nil || status.ID() != instance.ID() || status.State() != infrav1.InstanceStateActive {
		t.Fatalf("the server, looked up by name as CAPO does: %+v", status)
	}
	addrs, err := status.NetworkStatus()
	must(t, "NetworkStatus", err)
	ip := addrs.IP(osc.Status.Network.Name)
	if ip == "" {
		t.Fatalf("the server has no address on %s: %+v", osc.Status.Network.Name, addrs)
	}
	machine := &infrav1.OpenStackMachine{ObjectMeta: metav1.ObjectMeta{Name: machineName, Namespace: osc.Namespace}}
	must(t, "ReconcileLoadBalancerMember", lbs.ReconcileLoadBalancerMember(osc, machine, clusterResourceName, ip))

	held := sim.resources(t, projectID)
	for coll, want := range map[string]int{"networks": 1, "subnets": 1, "routers": 1, "security-groups": 2,
		"servers": 1, "floatingips": 1, "lb:loadbalancers": 1, "lb:listeners": 1, "lb:pools": 1,
		"lb:members": 1, "lb:healthmonitors": 1, "ports": 3, "server-groups": 1, "volumes": 1} { // server, router interface, VIP
		if len(held[coll]) != want {
			t.Errorf("%s: %d in the project, want %d (%v)", coll, len(held[coll]), want, held)
		}
	}

	// Deletion, in the order of CAPO's OpenStackServer and OpenStackCluster controllers.
	must(t, "DeleteLoadBalancerMember", lbs.DeleteLoadBalancerMember(osc, machine, clusterResourceName))
	must(t, "DeleteInstance", computeService.DeleteInstance(osc, status))
	must(t, "DeleteVolumes", computeService.DeleteVolumes(machineName, &infrav1.RootVolume{SizeGiB: 25}, nil))
	for _, p := range resources.Ports {
		must(t, "DeleteInstanceTrunkAndPort", net.DeleteInstanceTrunkAndPort(osc, p, false))
	}
	_, err = lbs.DeleteLoadBalancer(osc, clusterResourceName)
	must(t, "DeleteLoadBalancer", err)
	must(t, "DeleteRouter", net.DeleteRouter(osc, clusterResourceName))
	must(t, "DeleteClusterPorts", net.DeleteClusterPorts(osc))
	must(t, "DeleteNetwork", net.DeleteNetwork(osc, clusterResourceName))
	must(t, "DeleteSecurityGroups", net.DeleteSecurityGroups(osc, clusterResourceName))
	must(t, "server group delete", servergroups.Delete(ctx, computeClient, group.ID).ExtractErr())
	if left := sim.resources(t, projectID); len(left) != 0 {
		t.Errorf("left behind in the project after CAPO's deletion: %v", left)
	}

	// Every other call was authenticated as the application credential, in its project.
	var calls int
	for _, r := range sim.requests(t) {
		if r.ProjectID == "" || strings.HasPrefix(r.Path, "/v2.1/os-quota-sets/") { // the admin's quota
			continue
		}
		calls++
		if r.ProjectID != projectID || r.ApplicationCredentialID != appCred.ID {
			t.Errorf("%s %s ran as project %s, credential %s", r.Method, r.Path, r.ProjectID, r.ApplicationCredentialID)
		}
		if r.Status >= 500 {
			t.Errorf("%s %s answered %d", r.Method, r.Path, r.Status)
		}
	}
	if calls < 30 {
		t.Errorf("only %d authenticated calls reached the simulator", calls)
	}
	t.Logf("%d authenticated CAPO calls; methods and paths:\n%s", calls, summary(sim.requests(t)))
}

func summary(reqs []request) string {
	counts := map[string]int{}
	var order []string
	for _, r := range reqs {
		k := fmt.Sprintf("%d %s %s", r.Status, r.Method, r.Path)
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "  %3dx %s\n", counts[k], k)
	}
	return b.String()
}
