package fakeopenstack

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	novaservers "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack/boot"
)

// recordingBooter is a fake Booter: it records what the simulator asks of it.
type recordingBooter struct {
	mu     sync.Mutex
	booted map[string]*boot.Node
	halted []string
}

func (b *recordingBooter) Boot(_ context.Context, id string, n *boot.Node) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.booted[id] = n
	return nil
}

func (b *recordingBooter) Halt(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.halted = append(b.halted, id)
	return nil
}

func (b *recordingBooter) node(id string) *boot.Node {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.booted[id]
}

// workerUserData is cloud-config as CABPK writes it for a worker: kubeadm join.
const workerUserData = `## template: jinja
#cloud-config
write_files:
- path: /run/kubeadm/kubeadm-join-config.yaml
  content: |
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: JoinConfiguration
    discovery:
      bootstrapToken:
        apiServerEndpoint: 127.24.4.9:6443
        token: abcdef.0123456789abcdef
        caCertHashes: ["sha256:00"]
    nodeRegistration:
      name: '{{ local_hostname }}'
      kubeletExtraArgs:
      - name: provider-id
        value: openstack:///'{{ instance_id }}'
runcmd:
- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml
`

// TestServersBootTheirUserData: a server with kubeadm user data boots into a node (the Booter gets
// the node its user data describes); a server of an image marked never to boot, or without kubeadm
// user data, does not; deleting a server halts it.
func TestServersBootTheirUserData(t *testing.T) {
	ctx := context.Background()
	seed := DefaultSeed()
	noBoot := seed.Images[1]
	noBoot.ID, noBoot.Name = "2404a136-0b00-4000-8000-000000000136", noBoot.Name+"-noboot"
	noBoot.Properties = map[string]string{ImageBootProperty: "never"}
	seed.Images = append(seed.Images, noBoot)
	booter := &recordingBooter{booted: map[string]*boot.Node{}}
	cloud, err := New(seed, WithCallers(simCallers), WithBoot(booter, slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	srv := httptest.NewServer(cloud.Handler(ComputeService))
	t.Cleanup(srv.Close)
	a := simCloud{computeURL: srv.URL}.clients("token-a")

	create := func(name, image, userData string) string {
		s, err := novaservers.Create(ctx, a.compute, novaservers.CreateOpts{Name: name, ImageRef: image, FlavorRef: "2",
			UserData: []byte(userData)}, nil).Extract()
		require.NoError(t, err)
		return s.ID
	}
	worker := create("Demo-Worker-0", ImageKube1363ID, workerUserData)
	plain := create("plain", ImageKube1363ID, "#!/bin/sh\necho hello\n")
	broken := create("broken", noBoot.ID, workerUserData)
	require.Eventually(t, func() bool { return booter.node(worker) != nil }, 5*time.Second, 20*time.Millisecond)
	n := booter.node(worker)
	assert.Equal(t, boot.RoleJoinWorker, n.Role)
	assert.Equal(t, "demo-worker-0", n.Name)
	assert.Equal(t, "openstack:///"+worker, n.ProviderID)
	assert.Equal(t, "127.24.4.9:6443", n.Endpoint)
	time.Sleep(100 * time.Millisecond) // boots run in the background: give the others their chance
	assert.Nil(t, booter.node(plain), "no kubeadm in the user data: no node")
	assert.Nil(t, booter.node(broken), "the image never boots")

	require.NoError(t, novaservers.Delete(ctx, a.compute, worker).ExtractErr())
	booter.mu.Lock()
	defer booter.mu.Unlock()
	assert.Equal(t, []string{worker}, booter.halted)
}

// TestSetPublicCIDR: the external subnet moves (the local stack puts it on 127/8, where a simulated
// workload cluster's API can answer on its floating IP); a bad CIDR is refused.
func TestSetPublicCIDR(t *testing.T) {
	seed := DefaultSeed()
	require.NoError(t, seed.SetPublicCIDR("127.24.4.7/24"))
	for _, s := range seed.Subnets {
		if s.ID == PublicSubnetID {
			assert.Equal(t, "127.24.4.0/24", s.CIDR)
			assert.Equal(t, "127.24.4.1", s.GatewayIP)
		}
	}
	require.NoError(t, seed.Validate())
	require.Error(t, seed.SetPublicCIDR("127.24.4.0"))
	require.Error(t, seed.SetPublicCIDR("fd00::/64"))
}
