package fakeopenstack

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack/boot"
)

// Booter is what a server does with its user data once it is ACTIVE (boot.Workloads: a kubeadm
// node joins a simulated workload cluster) and what its deletion ends.
type Booter interface {
	Boot(ctx context.Context, serverID string, n *boot.Node) error
	Halt(ctx context.Context, serverID string) error
}

// WithBoot makes servers boot their user data with b; logs what came of it. Without it servers
// become ACTIVE and nothing boots.
func WithBoot(b Booter, log *slog.Logger) Option {
	return func(c *Cloud) { c.boot = &booting{booter: b, log: log, running: map[string]context.CancelFunc{}} }
}

// booting tracks the boots under way, so that deleting a server ends its boot.
type booting struct {
	booter  Booter
	log     *slog.Logger
	mu      sync.Mutex
	running map[string]context.CancelFunc // by server ID
}

// ImageBootProperty set to "never" on an image makes its servers never boot: they stay ACTIVE and
// no node comes of them, as with an image that does not boot on a real cloud.
const ImageBootProperty = "fake_openstack_boot"

// start boots the server in the background, as a real server boots after Nova answered.
func (b *booting) start(id, name, userData string, image Image) {
	if b == nil || userData == "" {
		return
	}
	if image.Properties[ImageBootProperty] == "never" {
		b.log.Info("server's image never boots", "server", id, "name", name, "image", image.Name)
		return
	}
	node, err := boot.Parse(userData, boot.Server{ID: id, Name: name})
	if errors.Is(err, boot.ErrNotKubeadm) {
		return
	}
	if err != nil {
		b.log.Warn("server boots, but its user data makes no node", "server", id, "name", name, "error", err)
		return
	}
	// The kubelet is the image's: a machine of an upgrade, booted from the new image, reports the
	// new version while the cluster's version is still the init's.
	node.KubeletVersion = image.Properties["kube_version"]
	ctx, cancel := context.WithCancel(context.Background())
	b.mu.Lock()
	b.running[id] = cancel
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			delete(b.running, id)
			b.mu.Unlock()
			cancel()
		}()
		if err := b.booter.Boot(ctx, id, node); err != nil {
			b.log.Warn("node did not join", "server", id, "node", node.Name, "role", node.Role, "endpoint", node.Endpoint, "error", err)
			return
		}
		b.log.Info("node joined", "server", id, "node", node.Name, "role", node.Role, "endpoint", node.Endpoint)
	}()
}

// stop ends the server's boot, or its node once booted.
func (b *booting) stop(id string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	cancel := b.running[id]
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if err := b.booter.Halt(context.Background(), id); err != nil {
		b.log.Warn("halting the server's node", "server", id, "error", err)
	}
}
