package rpc

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

func optionsFrom(t *testing.T, text string) (Options, error) {
	t.Helper()
	f, err := config.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return OptionsFromConfig(f)
}

func TestOptionsDefaultsMatchPython(t *testing.T) {
	o, err := optionsFrom(t, "[DEFAULT]\nhost = conductor-1\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Hosts) != 1 || o.Hosts[0] != (Host{"localhost", 5672, "guest", "guest"}) || o.VirtualHost != "/" {
		t.Fatalf("rabbit:// should mean guest@localhost:5672/: %+v %q", o.Hosts, o.VirtualHost)
	}
	if o.Exchange != "magnum" || o.Topic != "magnum-conductor" || o.ServerID != "conductor-1" || o.LoginMethod != "AMQPLAIN" ||
		o.ResponseTimeout != 60*time.Second || o.TransientQueuesTTL != 1800*time.Second || o.PrefetchCount != 0 ||
		o.Heartbeat != 60*time.Second || o.MissingReplyQueueTimeout != 60*time.Second || o.durable() || o.AutoDelete {
		t.Fatalf("defaults differ from oslo/magnum: %#v", o)
	}
	// Declarations with defaults, as captured from oslo.messaging.
	if ex := o.topicExchange(); ex != (exchangeDecl{"magnum", "topic", false, false}) {
		t.Errorf("topic exchange %+v", ex)
	}
	if q := o.topicQueue("magnum-conductor"); q.Durable || q.AutoDelete || len(q.Args) != 0 || q.Exchange != "magnum" || q.Key != "magnum-conductor" {
		t.Errorf("topic queue %+v", q)
	}
	if ex := o.fanoutExchange(); ex != (exchangeDecl{"magnum-conductor_fanout", "fanout", false, true}) {
		t.Errorf("fanout exchange %+v", ex)
	}
	fq := o.fanoutQueue("abc")
	if fq.Name != "magnum-conductor_fanout_abc" || fq.Durable || fq.AutoDelete || !reflect.DeepEqual(fq.Args, amqp.Table{"x-expires": int32(1800000)}) ||
		fq.Exchange != "magnum-conductor_fanout" || fq.Key != "magnum-conductor" {
		t.Errorf("fanout queue %+v", fq)
	}
	rq := o.replyQueue("reply_x")
	if rq.Durable || rq.AutoDelete || !reflect.DeepEqual(rq.Args, amqp.Table{"x-expires": int32(1800000)}) || rq.Exchange != "" {
		t.Errorf("reply queue %+v", rq)
	}
	if pq := o.parkingQueue(); pq.Name != "magnum-conductor.parked" || !pq.Durable {
		t.Errorf("parking queue %+v", pq)
	}
}

func TestOptionsFullConfig(t *testing.T) {
	o, err := optionsFrom(t, `
[DEFAULT]
transport_url = rabbit://us%40er:p%40ss%3Aw%2Fo:rd@rabbit1:5673,other:pw2@[fd00::2]:5674,rabbit3/magnum%2Fprod?heartbeat_timeout_threshold=30
control_exchange = openstack
rpc_response_timeout = 120
[conductor]
topic = my-conductor
[oslo_messaging_rabbit]
amqp_durable_queues = true
amqp_auto_delete = false
rabbit_quorum_queue = true
rabbit_quorum_delivery_limit = 5
rabbit_quroum_max_memory_length = 100
rabbit_quorum_max_memory_bytes = 3000000000
rabbit_transient_queues_ttl = 600
rabbit_qos_prefetch_count = 10
heartbeat_timeout_threshold = 20
rabbit_login_method = PLAIN
`)
	if err != nil {
		t.Fatal(err)
	}
	wantHosts := []Host{{"rabbit1", 5673, "us@er", "p@ss:w/o:rd"}, {"fd00::2", 5674, "other", "pw2"}, {"rabbit3", 5672, "", ""}}
	if !reflect.DeepEqual(o.Hosts, wantHosts) {
		t.Fatalf("hosts %#v", fmt.Sprintf("%+v", o.Hosts))
	}
	if o.Hosts[0].Password != "p@ss:w/o:rd" || o.VirtualHost != "magnum/prod" || o.Exchange != "openstack" || o.Topic != "my-conductor" ||
		o.ResponseTimeout != 2*time.Minute || o.LoginMethod != "PLAIN" || o.PrefetchCount != 10 {
		t.Fatalf("options %s", o)
	}
	if o.Heartbeat != 30*time.Second {
		t.Errorf("URL query must override the file: heartbeat %s", o.Heartbeat)
	}
	if !o.durable() || o.QuorumDeliveryLimit != 5 || o.QuorumMaxMemoryLength != 100 || o.QuorumMaxMemoryBytes != 3000000000 {
		t.Fatalf("quorum options %+v", o)
	}
	wantArgs := amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(5), "x-max-in-memory-length": int32(100), "x-max-in-memory-bytes": int64(3000000000)}
	if q := o.topicQueue("my-conductor"); !q.Durable || !reflect.DeepEqual(q.Args, wantArgs) {
		t.Errorf("quorum topic queue %+v", q)
	}
	if ex := o.topicExchange(); !ex.Durable || ex.Name != "openstack" {
		t.Errorf("exchange %+v", ex)
	}
	// Reply and fanout queues stay transient classic queues with x-expires, as oslo declares them.
	if q := o.replyQueue("r"); q.Durable || !reflect.DeepEqual(q.Args, amqp.Table{"x-expires": int32(600000)}) {
		t.Errorf("reply queue %+v", q)
	}
	// The password never appears in the printable forms.
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("opts", "options", o, "host", o.Hosts[0])
	for _, s := range []string{o.String(), fmt.Sprintf("%v %+v %#v %s", o, o, o, o), fmt.Sprint(o.Hosts), fmt.Sprintf("%#v", o.Hosts[0]), buf.String()} {
		if strings.Contains(s, "p@ss") || strings.Contains(s, "pw2") {
			t.Fatalf("password leaked: %s", s)
		}
	}
	if !strings.Contains(o.String(), "us@er:***@rabbit1:5673") {
		t.Errorf("String lacks the redacted host: %s", o)
	}
}

func TestOptionsHAAndTransientQuorum(t *testing.T) {
	o, err := optionsFrom(t, "[oslo_messaging_rabbit]\nrabbit_ha_queues = true\nrabbit_transient_queues_ttl = 60\n")
	if err != nil {
		t.Fatal(err)
	}
	if q := o.topicQueue("t"); !reflect.DeepEqual(q.Args, amqp.Table{"x-ha-policy": "all"}) {
		t.Errorf("ha topic queue args %v", q.Args)
	}
	if q := o.replyQueue("r"); !reflect.DeepEqual(q.Args, amqp.Table{"x-ha-policy": "all", "x-expires": int32(60000)}) {
		t.Errorf("ha reply queue args %v", q.Args)
	}
	o, err = optionsFrom(t, "[oslo_messaging_rabbit]\nrabbit_transient_quorum_queue = true\nrabbit_stream_fanout = true\nrabbit_qos_prefetch_count = 5\n")
	if err != nil {
		t.Fatal(err)
	}
	if q := o.replyQueue("r"); !q.Durable || q.Args["x-queue-type"] != "quorum" {
		t.Errorf("transient quorum reply queue %+v", q)
	}
	if q := o.fanoutQueue("ignored"); q.Name != "magnum-conductor_fanout" || !q.Durable ||
		!reflect.DeepEqual(q.Args, amqp.Table{"x-queue-type": "stream", "x-max-age": "1800s"}) {
		t.Errorf("stream fanout queue %+v", q)
	}
}

func TestOptionsSSL(t *testing.T) {
	o, err := optionsFrom(t, "[DEFAULT]\ntransport_url = rabbit://u:p@h/?ssl=1\n")
	if err != nil {
		t.Fatal(err)
	}
	if !o.SSL || o.Hosts[0].Port != 5671 {
		t.Fatalf("?ssl=1 should enable TLS on 5671: %s", o)
	}
	_, err = optionsFrom(t, "[DEFAULT]\ntransport_url = rabbit://u:p@h/\n[oslo_messaging_rabbit]\nssl = true\nssl_ca_file = /nonexistent/ca.pem\n")
	if err == nil || !strings.Contains(err.Error(), "[oslo_messaging_rabbit] ssl_ca_file") {
		t.Fatalf("missing CA file must name the key, got %v", err)
	}
}

func TestOptionsInvalidValuesNameTheKey(t *testing.T) {
	cases := map[string]string{
		"[oslo_messaging_rabbit]\namqp_durable_queues = maybe\n":                   "[oslo_messaging_rabbit] amqp_durable_queues",
		"[oslo_messaging_rabbit]\nrabbit_qos_prefetch_count = -1\n":                "[oslo_messaging_rabbit] rabbit_qos_prefetch_count",
		"[oslo_messaging_rabbit]\nrabbit_quroum_max_memory_length = ten\n":         "[oslo_messaging_rabbit] rabbit_quroum_max_memory_length",
		"[oslo_messaging_rabbit]\nrabbit_login_method = RABBIT-CR-DEMO\n":          "[oslo_messaging_rabbit] rabbit_login_method",
		"[oslo_messaging_rabbit]\nrabbit_quorum_queue = 1\nrabbit_ha_queues = 1\n": "[oslo_messaging_rabbit] rabbit_quorum_queue",
		"[oslo_messaging_rabbit]\nheartbeat_timeout_threshold = 1.5\n":             "[oslo_messaging_rabbit] heartbeat_timeout_threshold",
		"[DEFAULT]\ntransport_url = kafka://h\n":                                   "[DEFAULT] transport_url",
		"[DEFAULT]\ntransport_url = rabbit://u:secretpw@h:notaport/\n":             "[DEFAULT] transport_url",
		"[DEFAULT]\ntransport_url = rabbit://h/?amqp_durable_queues=perhaps\n":     "[DEFAULT] transport_url",
		"[DEFAULT]\nrpc_response_timeout = 0\n":                                    "[DEFAULT] rpc_response_timeout",
		"[DEFAULT]\nrpc_response_timeout = soon\n":                                 "[DEFAULT] rpc_response_timeout",
		"[conductor]\ntopic =\n":                                                   "[conductor] topic",
	}
	for text, key := range cases {
		_, err := optionsFrom(t, text)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("config %q: error %v should name %s", text, err, key)
		}
		if err != nil && strings.Contains(err.Error(), "secretpw") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

func TestBackoffGrowsAndIsBounded(t *testing.T) {
	b := newBackoff(100*time.Millisecond, 2*time.Second)
	for n := 0; n < 20; n++ {
		d := b.Step()
		ceil := 100 * time.Millisecond << min(n, 5)
		if ceil > 2*time.Second {
			ceil = 2 * time.Second
		}
		if d < ceil/2 || d > ceil {
			t.Fatalf("attempt %d: %s outside [%s, %s]", n, d, ceil/2, ceil)
		}
	}
}

func TestOptionsTLSFiles(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcb-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	o, err := optionsFrom(t, fmt.Sprintf("[oslo_messaging_rabbit]\nssl = true\nssl_ca_file = %s\nssl_cert_file = %s\nssl_key_file = %s\nssl_version = TLSv1_3\n",
		certFile, certFile, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.tlsConfig("rabbit.example")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.MinVersion != tls.VersionTLS13 || cfg.ServerName != "rabbit.example" {
		t.Fatalf("tls config %+v", cfg)
	}
	_, err = optionsFrom(t, fmt.Sprintf("[oslo_messaging_rabbit]\nssl = true\nssl_cert_file = %s\n", certFile))
	if err == nil || !strings.Contains(err.Error(), "ssl_key_file") {
		t.Fatalf("a certificate without key must be refused naming ssl_key_file: %v", err)
	}
}
