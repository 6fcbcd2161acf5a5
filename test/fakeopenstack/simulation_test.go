package fakeopenstack

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumetypes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/attachinterfaces"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/keypairs"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	novaservers "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/apiversions"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/providers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simCallers: fixed test tokens. "token-a-appcred" is project A's application credential,
// "token-admin" an admin of another project (quotas only).
func simCallers(_ context.Context, token string) (Caller, error) {
	switch token {
	case "token-a":
		return Caller{ProjectID: "project-a", UserID: "user-a", AuthMethods: []string{"password"}}, nil
	case "token-a-appcred":
		return Caller{ProjectID: "project-a", UserID: "user-a", AuthMethods: []string{"application_credential"},
			ApplicationCredentialID: "appcred-1"}, nil
	case "token-b":
		return Caller{ProjectID: "project-b", UserID: "user-b", AuthMethods: []string{"password"}}, nil
	case "token-admin":
		return Caller{ProjectID: "project-admin", UserID: "admin", Roles: []string{"admin", "member"}}, nil
	}
	return Caller{}, ErrInvalidToken
}

// simClients are gophercloud service clients of one token, built the way openstack.NewComputeV2,
// NewNetworkV2 and NewLoadBalancerV2 build them from a catalog.
type simClients struct {
	compute, network, lb, volume *gophercloud.ServiceClient
}

type simCloud struct {
	cloud                                    *Cloud
	computeURL, networkURL, lbURL, volumeURL string
}

func startSim(t *testing.T, opts ...Option) simCloud {
	t.Helper()
	cloud, err := New(DefaultSeed(), append([]Option{WithCallers(simCallers)}, opts...)...)
	require.NoError(t, err)
	var s simCloud
	s.cloud = cloud
	for svc, dst := range map[Service]*string{ComputeService: &s.computeURL, NetworkService: &s.networkURL, LoadBalancerService: &s.lbURL, VolumeService: &s.volumeURL} {
		srv := httptest.NewServer(cloud.Handler(svc))
		t.Cleanup(srv.Close)
		*dst = srv.URL
	}
	return s
}

func (s simCloud) clients(token string) simClients { return s.clientsOf(token, "") }

// clientsOf also builds a volume client; Cinder's catalog URL names the project.
func (s simCloud) clientsOf(token, project string) simClients {
	pc := &gophercloud.ProviderClient{HTTPClient: http.Client{}}
	pc.SetToken(token)
	return simClients{
		// CAPO's compute client pins 2.38 and raises it to 2.53 (NovaTagging) for tagged servers.
		compute: &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: s.computeURL + "/v2.1/", Type: "compute", Microversion: "2.53"},
		network: &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: s.networkURL + "/", ResourceBase: s.networkURL + "/v2.0/", Type: "network"},
		lb:      &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: s.lbURL + "/", ResourceBase: s.lbURL + "/v2.0/", Type: "load-balancer"},
		volume:  &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: s.volumeURL + "/v3/" + project + "/", Type: "block-storage"},
	}
}

// TestCAPOCallSequence performs, with gophercloud, the calls CAPO v0.14.2 makes for a cluster with
// a managed network, security groups, an API load balancer with a floating IP and one control
// plane server, then deletes everything in CAPO's order and finds the project empty.
func TestCAPOCallSequence(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	a := sim.clients("token-a-appcred")
	tags := []string{"cluster-api-provider-openstack", "demo"}

	// Network, subnet, router (networking/network.go, router.go).
	netName := "k8s-clusterapi-cluster-magnum-demo"
	net, err := networks.Create(ctx, a.network, networks.CreateOpts{Name: netName, AdminStateUp: gophercloud.Enabled}).Extract()
	require.NoError(t, err)
	got, err := attributestags.ReplaceAll(ctx, a.network, "networks", net.ID, attributestags.ReplaceAllOpts{Tags: tags}).Extract()
	require.NoError(t, err)
	assert.Equal(t, tags, got)
	subnet, err := subnets.Create(ctx, a.network, subnets.CreateOpts{NetworkID: net.ID, Name: netName, IPVersion: 4,
		CIDR: "10.6.0.0/24", DNSNameservers: []string{"8.8.8.8"}}).Extract()
	require.NoError(t, err)
	assert.Equal(t, "10.6.0.1", subnet.GatewayIP)
	page, err := networks.List(a.network, networks.ListOpts{Name: netName, Tags: "demo"}).AllPages(ctx)
	require.NoError(t, err)
	listed, err := networks.ExtractNetworks(page)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, []string{subnet.ID}, listed[0].Subnets)
	router, err := routers.Create(ctx, a.network, routers.CreateOpts{Name: netName,
		GatewayInfo: &routers.GatewayInfo{NetworkID: PublicNetworkID}}).Extract()
	require.NoError(t, err)
	require.Len(t, router.GatewayInfo.ExternalFixedIPs, 1)
	iface, err := routers.AddInterface(ctx, a.network, router.ID, routers.AddInterfaceOpts{SubnetID: subnet.ID}).Extract()
	require.NoError(t, err)
	routerPort, err := ports.Get(ctx, a.network, iface.PortID).Extract()
	require.NoError(t, err)
	assert.Equal(t, "network:router_interface", routerPort.DeviceOwner)
	assert.Equal(t, "10.6.0.1", routerPort.FixedIPs[0].IPAddress)

	// Security groups and rules (securitygroups.go): two egress defaults come with each group.
	cp, err := groups.Create(ctx, a.network, groups.CreateOpts{Name: "k8s-cluster-magnum-demo-secgroup-controlplane", Description: "Cluster API managed group"}).Extract()
	require.NoError(t, err)
	worker, err := groups.Create(ctx, a.network, groups.CreateOpts{Name: "k8s-cluster-magnum-demo-secgroup-worker", Description: "Cluster API managed group"}).Extract()
	require.NoError(t, err)
	assert.Len(t, cp.Rules, 2)
	apiRule := rules.CreateOpts{Direction: rules.DirIngress, EtherType: rules.EtherType4, Protocol: rules.ProtocolTCP,
		PortRangeMin: 6443, PortRangeMax: 6443, RemoteIPPrefix: "0.0.0.0/0", SecGroupID: cp.ID, Description: "Kubernetes API"}
	_, err = rules.Create(ctx, a.network, apiRule).Extract()
	require.NoError(t, err)
	_, err = rules.Create(ctx, a.network, rules.CreateOpts{Direction: rules.DirIngress, EtherType: rules.EtherType4,
		Protocol: rules.ProtocolTCP, PortRangeMin: 10250, PortRangeMax: 10250, RemoteGroupID: worker.ID, SecGroupID: cp.ID}).Extract()
	require.NoError(t, err)
	_, err = rules.Create(ctx, a.network, apiRule).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusConflict), "a duplicate rule is refused: %v", err)
	page, err = groups.List(a.network, groups.ListOpts{Name: cp.Name}).AllPages(ctx)
	require.NoError(t, err)
	sgs, err := groups.ExtractGroups(page)
	require.NoError(t, err)
	require.Len(t, sgs, 1)
	assert.Len(t, sgs[0].Rules, 4)

	// Floating IP for the API server (floatingip.go), tagged, found by address.
	fip, err := floatingips.Create(ctx, a.network, floatingips.CreateOpts{FloatingNetworkID: PublicNetworkID, Description: "Created by cluster-api-provider-openstack cluster magnum-demo"}).Extract()
	require.NoError(t, err)
	assert.Equal(t, "DOWN", fip.Status)
	_, err = attributestags.ReplaceAll(ctx, a.network, "floatingips", fip.ID, attributestags.ReplaceAllOpts{Tags: tags}).Extract()
	require.NoError(t, err)
	page, err = floatingips.List(a.network, floatingips.ListOpts{FloatingIP: fip.FloatingIP}).AllPages(ctx)
	require.NoError(t, err)
	fips, err := floatingips.ExtractFloatingIPs(page)
	require.NoError(t, err)
	require.Len(t, fips, 1)

	// API load balancer (loadbalancer.go): LB, listener, pool, monitor; its VIP port gets the FIP.
	versionsPage, err := apiversions.List(a.lb).AllPages(ctx)
	require.NoError(t, err)
	versions, err := apiversions.ExtractAPIVersions(versionsPage)
	require.NoError(t, err)
	assert.Equal(t, octaviaVersion, versions[len(versions)-1].ID)
	providersPage, err := providers.List(a.lb, providers.ListOpts{}).AllPages(ctx)
	require.NoError(t, err)
	provs, err := providers.ExtractProviders(providersPage)
	require.NoError(t, err)
	assert.Equal(t, "amphora", provs[0].Name)
	lb, err := loadbalancers.Create(ctx, a.lb, loadbalancers.CreateOpts{Name: "k8s-clusterapi-cluster-magnum-demo-kubeapi",
		VipSubnetID: subnet.ID, VipNetworkID: net.ID, Tags: tags}).Extract()
	require.NoError(t, err)
	assert.Equal(t, "ACTIVE", lb.ProvisioningStatus)
	require.NotEmpty(t, lb.VipPortID)
	listener, err := listeners.Create(ctx, a.lb, listeners.CreateOpts{Name: lb.Name + "-6443", Protocol: "TCP", ProtocolPort: 6443,
		LoadbalancerID: lb.ID, AllowedCIDRs: []string{"0.0.0.0/0"}}).Extract()
	require.NoError(t, err)
	pool, err := pools.Create(ctx, a.lb, pools.CreateOpts{Name: lb.Name + "-6443", Protocol: "TCP", LBMethod: pools.LBMethodRoundRobin, ListenerID: listener.ID}).Extract()
	require.NoError(t, err)
	_, err = monitors.Create(ctx, a.lb, monitors.CreateOpts{Name: lb.Name + "-6443", PoolID: pool.ID, Type: "TCP", Delay: 10, Timeout: 5, MaxRetries: 5, MaxRetriesDown: 3}).Extract()
	require.NoError(t, err)
	lbPage, err := loadbalancers.List(a.lb, loadbalancers.ListOpts{Name: lb.Name}).AllPages(ctx)
	require.NoError(t, err)
	lbs, err := loadbalancers.ExtractLoadBalancers(lbPage)
	require.NoError(t, err)
	require.Len(t, lbs, 1)
	assert.Len(t, lbs[0].Listeners, 1)
	_, err = floatingips.Update(ctx, a.network, fip.ID, floatingips.UpdateOpts{PortID: &lb.VipPortID}).Extract()
	require.NoError(t, err)
	fipNow, err := floatingips.Get(ctx, a.network, fip.ID).Extract()
	require.NoError(t, err)
	assert.Equal(t, "ACTIVE", fipNow.Status)
	assert.Equal(t, lb.VipAddress, fipNow.FixedIP)
	// CAPO disassociates with a nil PortID, which gophercloud leaves out of the body.
	_, err = floatingips.Update(ctx, a.network, fip.ID, floatingips.UpdateOpts{PortID: nil}).Extract()
	require.NoError(t, err)
	fipNow, err = floatingips.Get(ctx, a.network, fip.ID).Extract()
	require.NoError(t, err)
	assert.Equal(t, "DOWN", fipNow.Status)
	assert.Empty(t, fipNow.PortID)
	_, err = floatingips.Update(ctx, a.network, fip.ID, floatingips.UpdateOpts{PortID: &lb.VipPortID}).Extract()
	require.NoError(t, err)

	// A control plane machine (compute/instance.go, networking/port.go): server group, port, server.
	group, err := servergroups.Create(ctx, a.compute, servergroups.CreateOpts{Name: "magnum-demo-control-plane", Policies: []string{"soft-anti-affinity"}}).Extract()
	require.NoError(t, err)
	port, err := ports.Create(ctx, a.network, ports.CreateOpts{Name: "magnum-demo-control-plane-abcde-0", NetworkID: net.ID,
		SecurityGroups: &[]string{cp.ID}}).Extract()
	require.NoError(t, err)
	page, err = ports.List(a.network, ports.ListOpts{Name: port.Name, NetworkID: net.ID}).AllPages(ctx)
	require.NoError(t, err)
	found, err := ports.ExtractPorts(page)
	require.NoError(t, err)
	require.Len(t, found, 1)
	userData := "#cloud-config\nkubeadm: {nodeRegistration: {kubeletExtraArgs: {cloud-provider: external}}}\n"
	created, err := novaservers.Create(ctx, a.compute, keypairs.CreateOptsExt{KeyName: DefaultKeypair, CreateOptsBuilder: novaservers.CreateOpts{
		Name: "magnum-demo-control-plane-abcde", ImageRef: ImageKube1363ID, FlavorRef: "3", AvailabilityZone: "nova",
		Networks: []novaservers.Network{{Port: port.ID}}, UserData: []byte(userData), Tags: tags,
		Metadata: map[string]string{"magnum_cluster": "demo"}}}, novaservers.SchedulerHintOpts{Group: group.ID}).Extract()
	require.NoError(t, err)
	server, err := novaservers.Get(ctx, a.compute, created.ID).Extract()
	require.NoError(t, err)
	var raw struct {
		UserData string `json:"OS-EXT-SRV-ATTR:user_data"`
	}
	require.NoError(t, novaservers.Get(ctx, a.compute, created.ID).ExtractInto(&raw))
	assert.Equal(t, "ACTIVE", server.Status)
	assert.Equal(t, "nova", server.AvailabilityZone)
	assert.Equal(t, DefaultKeypair, server.KeyName)
	assert.Equal(t, map[string]string{"magnum_cluster": "demo"}, server.Metadata)
	assert.Equal(t, "m1.medium", server.Flavor["original_name"])
	assert.Equal(t, ImageKube1363ID, server.Image["id"])
	assert.ElementsMatch(t, tags, *server.Tags)
	decoded, err := base64.StdEncoding.DecodeString(raw.UserData)
	require.NoError(t, err)
	assert.Equal(t, userData, string(decoded))
	addrs, _ := server.Addresses[netName].([]any)
	require.Len(t, addrs, 1, "the server has its port's address on the cluster network: %v", server.Addresses)
	assert.Equal(t, port.FixedIPs[0].IPAddress, addrs[0].(map[string]any)["addr"])
	sg, err := servergroups.Get(ctx, a.compute, group.ID).Extract()
	require.NoError(t, err)
	assert.Equal(t, []string{created.ID}, sg.Members)
	page, err = novaservers.List(a.compute, novaservers.ListOpts{Name: "^magnum-demo-control-plane-abcde$"}).AllPages(ctx)
	require.NoError(t, err)
	listedServers, err := novaservers.ExtractServers(page)
	require.NoError(t, err)
	require.Len(t, listedServers, 1)
	ifPage, err := attachinterfaces.List(a.compute, created.ID).AllPages(ctx)
	require.NoError(t, err)
	ifaces, err := attachinterfaces.ExtractInterfaces(ifPage)
	require.NoError(t, err)
	require.Len(t, ifaces, 1)
	assert.Equal(t, port.ID, ifaces[0].PortID)
	bound, err := ports.Get(ctx, a.network, port.ID).Extract()
	require.NoError(t, err)
	assert.Equal(t, created.ID, bound.DeviceID)
	_, err = pools.CreateMember(ctx, a.lb, pool.ID, pools.CreateMemberOpts{Name: server.Name, Address: port.FixedIPs[0].IPAddress, ProtocolPort: 6443}).Extract()
	require.NoError(t, err)

	// What CAPO refuses to do before its dependents are gone, Neutron refuses too.
	err = networks.Delete(ctx, a.network, net.ID).ExtractErr()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusConflict), "network with ports: %v", err)
	err = groups.Delete(ctx, a.network, cp.ID).ExtractErr()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusConflict), "group in use: %v", err)
	assert.NotEmpty(t, sim.cloud.ProjectResources("project-a"))

	// Delete in CAPO's order: load balancer (cascade), server, its ports, floating IP, router
	// interface and router, security groups, network, server group.
	require.NoError(t, loadbalancers.Delete(ctx, a.lb, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr())
	require.NoError(t, novaservers.Delete(ctx, a.compute, created.ID).ExtractErr())
	require.NoError(t, ports.Delete(ctx, a.network, port.ID).ExtractErr())
	require.NoError(t, floatingips.Delete(ctx, a.network, fip.ID).ExtractErr())
	_, err = routers.RemoveInterface(ctx, a.network, router.ID, routers.RemoveInterfaceOpts{SubnetID: subnet.ID}).Extract()
	require.NoError(t, err)
	require.NoError(t, routers.Delete(ctx, a.network, router.ID).ExtractErr())
	require.NoError(t, groups.Delete(ctx, a.network, cp.ID).ExtractErr())
	require.NoError(t, groups.Delete(ctx, a.network, worker.ID).ExtractErr())
	require.NoError(t, networks.Delete(ctx, a.network, net.ID).ExtractErr())
	require.NoError(t, servergroups.Delete(ctx, a.compute, group.ID).ExtractErr())
	assert.Empty(t, sim.cloud.ProjectResources("project-a"), "every simulated resource of the project is gone")

	// The request log names the project and the application credential of each call.
	var sawAppCred bool
	for _, req := range sim.cloud.Requests() {
		if req.Method == http.MethodPost && req.Path == "/v2.1/servers" {
			assert.Equal(t, "project-a", req.ProjectID)
			assert.Equal(t, "appcred-1", req.ApplicationCredentialID)
			assert.Equal(t, []string{"application_credential"}, req.AuthMethods)
			sawAppCred = true
		}
	}
	assert.True(t, sawAppCred)
}

// TestProjectsAreIsolated: another project's token neither sees nor touches the resources.
func TestProjectsAreIsolated(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	a, b := sim.clients("token-a"), sim.clients("token-b")
	net, err := networks.Create(ctx, a.network, networks.CreateOpts{Name: "a-net"}).Extract()
	require.NoError(t, err)
	subnet, err := subnets.Create(ctx, a.network, subnets.CreateOpts{NetworkID: net.ID, CIDR: "10.1.0.0/24", IPVersion: 4}).Extract()
	require.NoError(t, err)
	port, err := ports.Create(ctx, a.network, ports.CreateOpts{NetworkID: net.ID, Name: "a-port"}).Extract()
	require.NoError(t, err)
	srv, err := novaservers.Create(ctx, a.compute, novaservers.CreateOpts{Name: "a-server", ImageRef: ImageKube1363ID, FlavorRef: "2",
		Networks: []novaservers.Network{{Port: port.ID}}}, nil).Extract()
	require.NoError(t, err)

	page, err := networks.List(b.network, networks.ListOpts{}).AllPages(ctx)
	require.NoError(t, err)
	nets, err := networks.ExtractNetworks(page)
	require.NoError(t, err)
	for _, n := range nets {
		assert.NotEqual(t, net.ID, n.ID, "project B lists project A's network")
	}
	assert.Len(t, nets, len(DefaultSeed().Networks), "B sees the shared seed networks only")
	page, err = novaservers.List(b.compute, novaservers.ListOpts{}).AllPages(ctx)
	require.NoError(t, err)
	srvs, err := novaservers.ExtractServers(page)
	require.NoError(t, err)
	assert.Empty(t, srvs)
	for name, err := range map[string]error{
		"get server":          novaservers.Get(ctx, b.compute, srv.ID).Err,
		"delete server":       novaservers.Delete(ctx, b.compute, srv.ID).ExtractErr(),
		"get subnet":          subnets.Get(ctx, b.network, subnet.ID).Err,
		"delete network":      networks.Delete(ctx, b.network, net.ID).ExtractErr(),
		"delete port":         ports.Delete(ctx, b.network, port.ID).ExtractErr(),
		"tag network":         attributestags.ReplaceAll(ctx, b.network, "networks", net.ID, attributestags.ReplaceAllOpts{Tags: []string{"x"}}).Err,
		"port on A's network": ports.Create(ctx, b.network, ports.CreateOpts{NetworkID: net.ID}).Err,
	} {
		assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "%s: %v", name, err)
	}
	_, err = networks.Create(ctx, sim.clients("not-a-token").network, networks.CreateOpts{Name: "x"}).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusUnauthorized), "an invalid token: %v", err)
	_, err = novaservers.Get(ctx, a.compute, srv.ID).Extract()
	require.NoError(t, err, "project A still has its server")
}

// TestOverlappingSubnetsOfTwoProjects: CAPO gives every cluster's network the same node CIDR
// (10.6.0.0/24): two projects' routers each get their subnet's gateway address, their ports the
// same first addresses. Addresses are unique per subnet, not across the cloud.
func TestOverlappingSubnetsOfTwoProjects(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	var gateways, first []string
	for _, token := range []string{"token-a", "token-b"} {
		c := sim.clients(token)
		net, err := networks.Create(ctx, c.network, networks.CreateOpts{Name: "k8s-clusterapi-cluster"}).Extract()
		require.NoError(t, err)
		subnet, err := subnets.Create(ctx, c.network, subnets.CreateOpts{NetworkID: net.ID, CIDR: "10.6.0.0/24", IPVersion: 4}).Extract()
		require.NoError(t, err)
		router, err := routers.Create(ctx, c.network, routers.CreateOpts{Name: "k8s-clusterapi-cluster"}).Extract()
		require.NoError(t, err)
		iface, err := routers.AddInterface(ctx, c.network, router.ID, routers.AddInterfaceOpts{SubnetID: subnet.ID}).Extract()
		require.NoError(t, err, "%s: the router's interface on its own subnet", token)
		gw, err := ports.Get(ctx, c.network, iface.PortID).Extract()
		require.NoError(t, err)
		gateways = append(gateways, gw.FixedIPs[0].IPAddress)
		port, err := ports.Create(ctx, c.network, ports.CreateOpts{NetworkID: net.ID}).Extract()
		require.NoError(t, err)
		first = append(first, port.FixedIPs[0].IPAddress)
	}
	require.Equal(t, []string{"10.6.0.1", "10.6.0.1"}, gateways)
	require.Equal(t, []string{"10.6.0.2", "10.6.0.2"}, first)
}

// TestInstanceQuota: with the admin's instances=1 for a project, its second server is refused with
// Nova's TooManyInstances message; other projects keep the default.
func TestInstanceQuota(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	a, admin := sim.clients("token-a"), sim.clients("token-admin")
	_, err := quotasets.Update(ctx, a.compute, "project-a", quotasets.UpdateOpts{Instances: gophercloud.IntToPointer(5)}).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusForbidden), "a member cannot set quotas: %v", err)
	q, err := quotasets.Update(ctx, admin.compute, "project-a", quotasets.UpdateOpts{Instances: gophercloud.IntToPointer(1)}).Extract()
	require.NoError(t, err)
	assert.Equal(t, 1, q.Instances)
	create := func(c simClients, name string) error {
		_, err := novaservers.Create(ctx, c.compute, novaservers.CreateOpts{Name: name, ImageRef: ImageKube1363ID, FlavorRef: "2"}, nil).Extract()
		return err
	}
	require.NoError(t, create(a, "first"))
	err = create(a, "second")
	require.True(t, gophercloud.ResponseCodeIs(err, http.StatusForbidden), "%v", err)
	assert.Contains(t, err.Error(), "Quota exceeded for instances: Requested 1, but already used 1 of 1 instances")
	require.NoError(t, create(sim.clients("token-b"), "other project"))
	own, err := quotasets.Get(ctx, a.compute, "project-a").Extract()
	require.NoError(t, err)
	assert.Equal(t, 1, own.Instances)
}

// TestImageTagFilter: CAPO's image filter by tags lists images with ?tag=a&tag=b (all must match).
func TestImageTagFilter(t *testing.T) {
	seed := DefaultSeed()
	seed.Images[1].Tags = []string{"capi", "kube-v1.36"}
	cloud, err := New(seed)
	require.NoError(t, err)
	srv := httptest.NewServer(cloud.Handler(ImageService))
	t.Cleanup(srv.Close)
	for query, want := range map[string]int{"tag=capi": 1, "tag=capi&tag=kube-v1.36": 1, "tag=capi&tag=other": 0, "": 2} {
		resp, err := http.Get(srv.URL + "/v2/images?" + query)
		require.NoError(t, err)
		var body struct {
			Images []map[string]any `json:"images"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		assert.Len(t, body.Images, want, query)
	}
}

// TestInstanceQuotaHoldsUnderConcurrentCreates: controllers create servers concurrently; the quota
// check and the create are one step, so exactly the quota's worth succeed.
func TestInstanceQuotaHoldsUnderConcurrentCreates(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, WithInstanceQuota(5))
	a := sim.clients("token-a")
	results := make(chan error, 20)
	for i := range 20 {
		go func() {
			_, err := novaservers.Create(ctx, a.compute, novaservers.CreateOpts{Name: fmt.Sprintf("s%d", i),
				ImageRef: ImageKube1363ID, FlavorRef: "2"}, nil).Extract()
			results <- err
		}()
	}
	var ok, refused int
	for range 20 {
		err := <-results
		switch {
		case err == nil:
			ok++
		case gophercloud.ResponseCodeIs(err, http.StatusForbidden):
			refused++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	assert.Equal(t, 5, ok)
	assert.Equal(t, 15, refused)
	assert.Len(t, sim.cloud.ProjectResources("project-a")["servers"], 5)
}

// TestRequestLogLineNamesTheCredentialNotTheToken: the JSON line of a simulated call carries the
// project and application credential id, never the token.
func TestRequestLogLineNamesTheCredentialNotTheToken(t *testing.T) {
	var sink bytes.Buffer
	sim := startSim(t, WithRequestLog(&sink))
	_, err := networks.Create(context.Background(), sim.clients("token-a-appcred").network, networks.CreateOpts{Name: "n"}).Extract()
	require.NoError(t, err)
	line := sink.String()
	assert.Contains(t, line, `"project_id":"project-a"`)
	assert.Contains(t, line, `"application_credential_id":"appcred-1"`)
	assert.Contains(t, line, `"auth_methods":["application_credential"]`)
	assert.NotContains(t, line, "token-a-appcred")
}

// TestRootVolume: CAPO's root volume — a volume from the image, waited for until available, the
// server booted from it with delete_on_termination; in use it cannot be deleted, and it goes with
// the server.
func TestRootVolume(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	a := sim.clientsOf("token-a", "project-a")
	_, err := volumes.Create(ctx, a.volume, volumes.CreateOpts{Name: "m-root", Size: 10, ImageID: ImageKube1363ID}, nil).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusBadRequest), "smaller than the image's min_disk: %v", err)
	vol, err := volumes.Create(ctx, a.volume, volumes.CreateOpts{Name: "m-root", Size: 25, ImageID: ImageKube1363ID,
		Description: "Root volume for m"}, nil).Extract()
	require.NoError(t, err)
	page, err := volumes.List(a.volume, volumes.ListOpts{Name: "m-root", TenantID: "project-a"}).AllPages(ctx)
	require.NoError(t, err)
	listed, err := volumes.ExtractVolumes(page)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, "available", listed[0].Status)
	_, err = volumes.Get(ctx, sim.clientsOf("token-b", "project-a").volume, vol.ID).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusBadRequest), "another project's URL: %v", err)
	_, err = volumes.Get(ctx, sim.clientsOf("token-b", "project-b").volume, vol.ID).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "another project's volume: %v", err)

	srv, err := novaservers.Create(ctx, a.compute, novaservers.CreateOpts{Name: "m", FlavorRef: "3",
		BlockDevice: []novaservers.BlockDevice{{SourceType: novaservers.SourceVolume, DestinationType: novaservers.DestinationVolume,
			UUID: vol.ID, BootIndex: 0, DeleteOnTermination: true}}}, nil).Extract()
	require.NoError(t, err)
	got, err := novaservers.Get(ctx, a.compute, srv.ID).Extract()
	require.NoError(t, err)
	require.Len(t, got.AttachedVolumes, 1)
	assert.Equal(t, vol.ID, got.AttachedVolumes[0].ID)
	inUse, err := volumes.Get(ctx, a.volume, vol.ID).Extract()
	require.NoError(t, err)
	assert.Equal(t, "in-use", inUse.Status)
	err = volumes.Delete(ctx, a.volume, vol.ID, volumes.DeleteOpts{}).ExtractErr()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusBadRequest), "a volume in use: %v", err)
	_, err = novaservers.Create(ctx, a.compute, novaservers.CreateOpts{Name: "m2", FlavorRef: "3",
		BlockDevice: []novaservers.BlockDevice{{SourceType: novaservers.SourceVolume, DestinationType: novaservers.DestinationVolume,
			UUID: vol.ID, BootIndex: 0}}}, nil).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusBadRequest), "a second server on the same volume: %v", err)

	require.NoError(t, novaservers.Delete(ctx, a.compute, srv.ID).ExtractErr())
	_, err = volumes.Get(ctx, a.volume, vol.ID).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "deleted with the server: %v", err)
	assert.Empty(t, sim.cloud.ProjectResources("project-a"))
}

// TestUserDataLimit: Nova refuses base64 user data over 65535 characters; kubeadm's cloud-init
// must fit.
func TestUserDataLimit(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	a := sim.clients("token-a")
	create := func(raw int) error {
		_, err := novaservers.Create(ctx, a.compute, novaservers.CreateOpts{Name: "m", ImageRef: ImageKube1363ID, FlavorRef: "2",
			UserData: bytes.Repeat([]byte("x"), raw)}, nil).Extract()
		return err
	}
	require.NoError(t, create(49149)) // 65532 base64 characters
	err := create(49150)              // 65536
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusBadRequest), "%v", err)
}

// TestBadBodiesAreRefusedClearly: malformed JSON, a missing wrapper and wrongly typed attributes
// are 400 with a message naming the problem, and store nothing.
func TestBadBodiesAreRefusedClearly(t *testing.T) {
	sim := startSim(t)
	for _, tc := range []struct{ url, body, want string }{
		{sim.networkURL + "/v2.0/networks", `{"network": `, "Malformed request body"},
		{sim.networkURL + "/v2.0/networks", `{"name": "x"}`, "'network' is missing"},
		{sim.networkURL + "/v2.0/networks", `{"network": {"name": 7}}`, "Invalid input for name"},
		{sim.networkURL + "/v2.0/ports", `{"port": {"network_id": "x", "tags": [1]}}`, "Invalid input for tags"},
		{sim.lbURL + "/v2.0/lbaas/loadbalancers", `{"loadbalancer": {"vip_subnet_id": true}}`, "Invalid input for vip_subnet_id"},
		{sim.computeURL + "/v2.1/servers", `{"server": []}`, "Malformed request body"},
	} {
		req, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
		require.NoError(t, err)
		req.Header.Set("X-Auth-Token", "token-a")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.body)
		assert.Contains(t, string(body), tc.want, tc.body)
	}
	assert.Empty(t, sim.cloud.ProjectResources("project-a"))
}

// TestVolumeTypes: the volume type list magnum-capi-helm reads to make its StorageClasses (Cinder's own
// __DEFAULT__), in the caller's project only.
func TestVolumeTypes(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	page, err := volumetypes.List(sim.clientsOf("token-a", "project-a").volume, nil).AllPages(ctx)
	require.NoError(t, err)
	types, err := volumetypes.ExtractVolumeTypes(page)
	require.NoError(t, err)
	require.Len(t, types, 1)
	assert.Equal(t, "__DEFAULT__", types[0].Name)
	assert.True(t, types[0].IsPublic)
	_, err = volumetypes.List(sim.clientsOf("token-b", "project-a").volume, nil).AllPages(ctx)
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusBadRequest), "another project's URL: %v", err)
}
