package stack_test

import (
	"bufio"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
)

func TestTemplateCreateWithUbuntuImage(t *testing.T) {
	s := requireStack(t)
	// The fake logs with its own clock; a second of slack covers the granularity of the comparison.
	since := time.Now().Add(-time.Second)
	tpl := s.createTemplate(t, cloudDemo)

	assert.Equal(t, "kubernetes", tpl.COE)
	assert.Equal(t, "ubuntu", tpl.ClusterDistro, "copied from the image's os_distro; accepted only "+
		"because the k8s_capi_bridge driver provides (vm, ubuntu, kubernetes)")
	assert.Equal(t, "vm", tpl.ServerType)
	assert.Equal(t, ubuntuImage, tpl.ImageID)
	assert.Equal(t, externalNetwork, tpl.ExternalNetworkID)
	assert.Equal(t, "m1.small", tpl.FlavorID)
	assert.Equal(t, "m1.medium", tpl.MasterFlavorID)
	assert.Equal(t, "default", tpl.KeypairID)
	assert.False(t, tpl.Public)

	// magnum-api must have validated against the fake through the Keystone catalog.
	seen := map[string]bool{}
	for _, r := range fakeRequestsSince(t, s.requestLog, since) {
		switch {
		case r.Service == fakeopenstack.ImageService && r.Path == "/v2/images" &&
			strings.Contains(r.Query, "name="+ubuntuImage):
			seen["image lookup by name"] = true
		case r.Service == fakeopenstack.ComputeService && r.Path == "/v2.1/flavors/detail":
			seen["flavor list"] = true
		case r.Service == fakeopenstack.NetworkService && r.Path == "/v2.0/networks" &&
			strings.Contains(r.Query, "router%3Aexternal=True"):
			seen["external network list"] = true
		}
	}
	for _, want := range []string{"image lookup by name", "flavor list", "external network list"} {
		assert.True(t, seen[want], "the fake saw no %s from magnum-api", want)
	}
}

func fakeRequestsSince(t *testing.T, path string, since time.Time) []fakeopenstack.Request {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []fakeopenstack.Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var r fakeopenstack.Request
		if json.Unmarshal(sc.Bytes(), &r) == nil && !r.Time.Before(since) {
			out = append(out, r)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// osloMessage is the inner message of an oslo.messaging 2.0 envelope, as far as this test reads it.
type osloMessage struct {
	Method      string  `json:"method"`
	MsgID       *string `json:"_msg_id"`
	ProjectName string  `json:"_context_project_name"`
	UserName    string  `json:"_context_user_name"`
	Args        struct {
		Cluster struct {
			Name    string `json:"magnum_object.name"`
			Version string `json:"magnum_object.version"`
			Data    struct {
				UUID              string `json:"uuid"`
				Name              string `json:"name"`
				ClusterTemplateID string `json:"cluster_template_id"`
			} `json:"magnum_object.data"`
		} `json:"cluster"`
		MasterCount int `json:"master_count"`
		NodeCount   int `json:"node_count"`
	} `json:"args"`
}

func TestClusterCreateIsAcceptedAndItsCastReachesRabbitMQ(t *testing.T) {
	s := requireStack(t)
	tpl := s.createTemplate(t, cloudDemo)

	conn, err := amqp.Dial(s.amqpURL)
	require.NoError(t, err, "RabbitMQ from [DEFAULT] transport_url")
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	// Declared exactly as oslo.messaging declares it (topic, not durable, not auto-delete): a
	// mismatch would close the channel with PRECONDITION_FAILED, and so would the API's next publish.
	require.NoError(t, ch.ExchangeDeclare("magnum", "topic", false, false, false, false, nil))
	// A private queue next to whatever consumes magnum-conductor (the bridge, if running): both get
	// a copy, nobody's messages are taken away.
	q, err := ch.QueueDeclare(uniqueName("mcb-e2e-observe"), false, true, true, false,
		amqp.Table{"x-expires": int32(10 * 60 * 1000)})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q.Name, "magnum-conductor", "magnum", false, nil))
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)

	name := uniqueName("mcb-e2e-cluster")
	res, err := s.openstack(t, cloudDemo, "--debug", "coe", "cluster", "create", name,
		"--cluster-template", tpl.UUID, "--master-count", "1", "--node-count", "1")
	require.NoError(t, err)
	m := acceptedCluster.FindStringSubmatch(res.stdout)
	require.NotNil(t, m, "CLI output: %s", res.stdout)
	clusterUUID := m[1]
	// With magnum-capi-bridge running the cluster really exists; without a conductor there is no row
	// and the delete answers 404, which is fine.
	t.Cleanup(func() {
		if _, err := s.openstack(t, cloudDemo, "coe", "cluster", "delete", clusterUUID); err != nil &&
			!strings.Contains(err.Error(), "could not be found") {
			t.Logf("cleanup: cluster %s: %v", clusterUUID, err)
		}
	})
	status, err := responseStatus(res.stderr, "POST", "http://127.0.0.1:9511/v1/clusters")
	require.NoError(t, err)
	assert.Equal(t, 202, status, "POST /v1/clusters")

	timeout := time.After(30 * time.Second)
	others := 0
	for {
		select {
		case d, ok := <-deliveries:
			require.True(t, ok, "the AMQP channel closed")
			var envelope struct {
				Version string `json:"oslo.version"`
				Message string `json:"oslo.message"`
			}
			require.NoError(t, json.Unmarshal(d.Body, &envelope), "not an oslo envelope: %s", d.Body)
			require.Equal(t, "2.0", envelope.Version)
			var msg osloMessage
			require.NoError(t, json.Unmarshal([]byte(envelope.Message), &msg))
			if msg.Method != "cluster_create" || msg.Args.Cluster.Data.Name != name {
				others++ // someone else's traffic on the shared exchange
				continue
			}
			assert.Equal(t, "magnum", d.Exchange)
			assert.Equal(t, "magnum-conductor", d.RoutingKey)
			assert.Equal(t, "application/json", d.ContentType)
			assert.Nil(t, msg.MsgID, "cluster_create is a cast: no _msg_id")
			assert.Equal(t, "Cluster", msg.Args.Cluster.Name)
			assert.Equal(t, clusterUUID, msg.Args.Cluster.Data.UUID)
			assert.Equal(t, tpl.UUID, msg.Args.Cluster.Data.ClusterTemplateID)
			assert.Equal(t, 1, msg.Args.MasterCount)
			assert.Equal(t, 1, msg.Args.NodeCount)
			assert.Equal(t, "demo", msg.ProjectName)
			assert.Equal(t, "demo", msg.UserName)
			return
		case <-timeout:
			t.Fatalf("no cluster_create cast for %s within 30 s (%d other message(s) seen)", name, others)
		}
	}
}

func TestTenantsSeeOnlyTheirOwnTemplatesAndClusters(t *testing.T) {
	s := requireStack(t)
	tpl := s.createTemplate(t, cloudDemo)

	templateList := []string{"coe", "cluster", "template", "list"}
	assert.True(t, s.listUUIDs(t, cloudDemo, templateList...)[tpl.UUID], "demo lists its own template")
	assert.False(t, s.listUUIDs(t, cloudAlt, templateList...)[tpl.UUID], "alt_demo must not list demo's template")
	assert.True(t, s.listUUIDs(t, cloudAdmin, templateList...)[tpl.UUID], "admin lists every project's templates")
	_, err := s.openstack(t, cloudAlt, "coe", "cluster", "template", "show", tpl.UUID)
	if assert.Error(t, err, "alt_demo must not see demo's template") {
		assert.Contains(t, err.Error(), "could not be found")
	}

	// Without a conductor magnum-api never writes cluster rows, so the test writes one for demo the
	// way the conductor would (cluster + its two default nodegroups), in a failed state no conductor
	// acts on, and removes it again.
	clusterUUID := insertCluster(t, s, tpl)
	clusterList := []string{"coe", "cluster", "list"}
	assert.True(t, s.listUUIDs(t, cloudDemo, clusterList...)[clusterUUID], "demo lists its own cluster")
	assert.False(t, s.listUUIDs(t, cloudAlt, clusterList...)[clusterUUID], "alt_demo must not list demo's cluster")
	assert.True(t, s.listUUIDs(t, cloudAdmin, clusterList...)[clusterUUID], "admin lists every project's clusters")
	_, err = s.openstack(t, cloudAlt, "coe", "cluster", "show", clusterUUID)
	if assert.Error(t, err, "alt_demo must not see demo's cluster") {
		assert.Contains(t, err.Error(), "could not be found")
	}
}

// insertCluster writes a CREATE_FAILED cluster of demo's into Magnum's DB and deletes it at cleanup.
func insertCluster(t *testing.T, s *stack, tpl clusterTemplate) string {
	t.Helper()
	projectID := idOf(t, s, "project", "demo")
	userID := idOf(t, s, "user", "demo")

	db, err := sql.Open("mysql", s.magnumDSN)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clusterUUID := newUUID(t)
	t.Cleanup(func() {
		for _, stmt := range []string{"DELETE FROM nodegroup WHERE cluster_id = ?", "DELETE FROM cluster WHERE uuid = ?"} {
			if _, err := db.Exec(stmt, clusterUUID); err != nil {
				t.Errorf("cleanup: %s: %v", stmt, err)
			}
		}
	})
	const reason = "written by test/stack (tenant isolation check) and deleted by it"
	_, err = db.Exec(`INSERT INTO cluster (created_at, uuid, name, cluster_template_id, project_id,
		user_id, status, status_reason, create_timeout, keypair, labels, master_flavor_id, flavor_id,
		health_status_reason, floating_ip_enabled, master_lb_enabled)
		VALUES (UTC_TIMESTAMP(), ?, ?, ?, ?, ?, 'CREATE_FAILED', ?, 60, 'default', '{}', 'm1.medium',
		'm1.small', '{}', 1, 0)`,
		clusterUUID, uniqueName("mcb-e2e-isolation"), tpl.UUID, projectID, userID, reason)
	require.NoError(t, err)
	for _, ng := range []struct{ name, role, flavor string }{
		{"default-master", "master", "m1.medium"}, {"default-worker", "worker", "m1.small"},
	} {
		_, err = db.Exec(`INSERT INTO nodegroup (created_at, uuid, name, cluster_id, project_id, labels,
			flavor_id, image_id, node_addresses, node_count, min_node_count, role, is_default, status,
			status_reason) VALUES (UTC_TIMESTAMP(), ?, ?, ?, ?, '{}', ?, ?, '[]', 1, 0, ?, 1,
			'CREATE_FAILED', ?)`,
			newUUID(t), ng.name, clusterUUID, projectID, ng.flavor, ubuntuImage, ng.role, reason)
		require.NoError(t, err)
	}
	return clusterUUID
}

func idOf(t *testing.T, s *stack, kind, name string) string {
	t.Helper()
	res, err := s.openstack(t, cloudAdmin, kind, "show", name, "-f", "value", "-c", "id")
	require.NoError(t, err)
	id := strings.TrimSpace(res.stdout)
	require.Regexp(t, `^[0-9a-f]{32}$`, id, "%s %s", kind, name)
	return id
}

func newUUID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
