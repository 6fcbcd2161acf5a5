package peer

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestPeerClustersComplete proves the harness that hands the peer's clusters to another conductor:
// the peer (magnum-conductor 23.0.0 with magnum-capi-helm) creates two clusters whose machines boot
// in the OpenStack simulator, adds a node group to one of them, and all of it completes in its
// database; then it stops, leaving the database, the vhost and the namespaces in place.
func TestPeerClustersComplete(t *testing.T) {
	if os.Getenv("MCB_PEER") != "1" {
		t.Skip("MCB_PEER=1 runs the peer conductor against the local stack (after `make up` and deploy/local/peer-up.sh)")
	}
	testutil.Require(t, testutil.E2E)
	testutil.Require(t, testutil.Integration)
	ctx := context.Background()
	env := newBenchEnv(t)
	peer := env.startPeer(t)
	env.startFakeAddonProvider(t, peer.namespacePrefix+"-")

	clusters := env.createCompleteClusters(ctx, t, peer,
		peerClusterSpec{name: "complete-a", extraNodeGroup: "extra"},
		peerClusterSpec{name: "complete-b"})

	peer.stop()
	for _, c := range clusters {
		var status string
		if err := peer.db.QueryRowContext(ctx, "SELECT status FROM cluster WHERE uuid = ?", c.uuid).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != string(c.status) {
			t.Errorf("%s: row status %s after the peer stopped, want %s", c.name, status, c.status)
		}
		rows, err := peer.db.QueryContext(ctx, "SELECT name, status FROM nodegroup WHERE cluster_id = ? ORDER BY id", c.uuid)
		if err != nil {
			t.Fatal(err)
		}
		var groups []string
		for rows.Next() {
			var name, ngStatus string
			if err := rows.Scan(&name, &ngStatus); err != nil {
				t.Fatal(err)
			}
			groups = append(groups, name+" "+ngStatus)
			if ngStatus != string(magnum.StatusCreateComplete) {
				t.Errorf("%s: node group %s is %s", c.name, name, ngStatus)
			}
		}
		rows.Close()
		fmt.Printf("# %s (%s, CAPI Cluster %s/%s): %s; node groups %v; CREATE_COMPLETE %.1f s, node group %.1f s, all Machines Running %.1f s\n",
			c.name, c.uuid, c.namespace, c.stackID, status, groups, c.toCreateComplete.Seconds(), c.toNodeGroupComplete.Seconds(), c.toMachinesRunning.Seconds())
	}
	fmt.Printf("# handover: database %s, transport %s, [capi_helm] namespace_prefix %s\n", redactURL(peer.dbURL), redactURL(peer.transportURL), peer.namespacePrefix)
}

// redactURL hides a URL's password for the log.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	cred, host, ok := strings.Cut(rest, "@")
	if !ok {
		return u
	}
	if user, _, hasPW := strings.Cut(cred, ":"); hasPW {
		cred = user + ":***"
	}
	return scheme + "://" + cred + "@" + host
}
