package testutil

import (
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultManagementKubeconfig is where `make up` writes the management cluster's admin kubeconfig.
const DefaultManagementKubeconfig = "/var/lib/magnum-capi-bridge/mgmt/admin.kubeconfig"

// ManagementCluster is the local management cluster (`make up`; MCB_KUBECONFIG overrides the
// kubeconfig path): its kubeconfig path and a REST config with room for tests that list a lot. It is
// of the E2E tier: without the `e2e` build tag the test is skipped; with it, a missing or unreachable
// cluster fails the test with a hint.
func ManagementCluster(t testing.TB) (string, *rest.Config) {
	t.Helper()
	Require(t, E2E)
	path := env("MCB_KUBECONFIG", DefaultManagementKubeconfig)
	hint := "start it with `make up` (or deploy/local/mgmt-up.sh)"
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("management cluster kubeconfig %s: %v (%s)", path, err, hint)
	}
	cfg.QPS, cfg.Burst = 100, 200
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 5 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		t.Fatalf("management cluster at %s: %v", cfg.Host, err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		t.Fatalf("management cluster at %s is not reachable: %v (%s)", cfg.Host, err, hint)
	}
	return path, cfg
}
