package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tlsclient"
)

// Host is one broker of the transport URL.
type Host struct {
	Hostname string
	Port     int
	Username string
	Password string
}

// Options holds everything that determines the wire and the declarations (read from
// magnum.conf by OptionsFromConfig, so that they equal the Python services'), plus the Go-side
// behaviour of Server and Client. Build it with OptionsFromConfig or DefaultOptions and adjust.
type Options struct {
	// ---- transport ([DEFAULT] transport_url, [oslo_messaging_rabbit]) ----
	Hosts       []Host
	VirtualHost string
	SSL         bool
	SSLCAFile   string
	SSLCertFile string
	SSLKeyFile  string
	SSLVersion  string
	// LoginMethod is AMQPLAIN (oslo's default) or PLAIN.
	LoginMethod string
	// Heartbeat is heartbeat_timeout_threshold, the negotiated heartbeat interval (0, which
	// disables heartbeats in Python, leaves the broker's interval in force).
	Heartbeat time.Duration
	// ReconnectInterval/ReconnectMax bound the exponential reconnect backoff
	// (rabbit_retry_interval, rabbit_interval_max).
	ReconnectInterval time.Duration
	ReconnectMax      time.Duration

	// ---- RPC target ----
	Exchange string // [DEFAULT] control_exchange, Magnum's default "magnum"
	Topic    string // [conductor] topic, default "magnum-conductor"
	// ServerID names the per-server queue <topic>.<ServerID>. Python uses a random id per start
	// (leaving orphaned queues behind); we use a stable one: [DEFAULT] host, else the hostname.
	ServerID string

	// ---- declarations ([oslo_messaging_rabbit]) ----
	DurableQueues         bool // amqp_durable_queues
	AutoDelete            bool // amqp_auto_delete
	QuorumQueues          bool // rabbit_quorum_queue
	QuorumDeliveryLimit   int  // rabbit_quorum_delivery_limit
	QuorumMaxMemoryLength int  // rabbit_quorum_max_memory_length (14.0.3: rabbit_quroum_…)
	QuorumMaxMemoryBytes  int  // rabbit_quorum_max_memory_bytes (14.0.3: rabbit_quroum_…)
	TransientQuorumQueues bool // rabbit_transient_quorum_queue (oslo.messaging ≥ 14.7)
	StreamFanout          bool // rabbit_stream_fanout (oslo.messaging ≥ 14.7)
	HAQueues              bool // rabbit_ha_queues
	// TransientQueuesTTL is rabbit_transient_queues_ttl: x-expires of reply and fanout queues.
	TransientQueuesTTL time.Duration
	// PrefetchCount is rabbit_qos_prefetch_count (0 = unlimited, as in Python).
	PrefetchCount int

	// ---- timeouts ----
	// ResponseTimeout is rpc_response_timeout: Client.Call's default timeout.
	ResponseTimeout time.Duration
	// MissingReplyQueueTimeout is kombu_missing_consumer_retry_timeout: how long a reply to a
	// missing reply queue is retried.
	MissingReplyQueueTimeout time.Duration

	// ---- Go-side server behaviour ----
	// Fanout: also consume the <topic>_fanout exchange (Magnum never publishes there).
	Fanout bool
	// ParkingQueue receives malformed casts; default "<topic>.parked".
	ParkingQueue string
	// Workers bounds concurrently running handlers.
	Workers int
	// DedupSize is how many finished _unique_ids are remembered.
	DedupSize int
	// ShutdownTimeout is how long in-flight handlers may run after shutdown starts.
	ShutdownTimeout time.Duration
	// RetryMin/RetryMax bound the backoff between attempts of a Retry()-marked failure;
	// RetryAttempts (0 = unlimited) caps the attempts before the message counts as failed.
	RetryMin, RetryMax time.Duration
	RetryAttempts      int
	// KeyFunc returns the serialization key of a request; nil means DefaultKeyFunc.
	KeyFunc func(*Request) string
	// Logger receives the package's logs; nil means slog.Default(). Lines about a message are
	// logged with its context, which carries the cluster, method and request id (logctx).
	Logger *slog.Logger
	// Observe, when set, is told how every delivery ended (for metrics); it must not block.
	Observe func(Observation)
	// OnBrokerError, when set, is called for every failed connection attempt and lost connection.
	OnBrokerError func()
	// ConnectionName is advertised to the broker (shown by rabbitmqctl list_connections).
	ConnectionName string
}

// DefaultOptions are the Python defaults (transport rabbit://guest:guest@localhost:5672/).
func DefaultOptions() Options {
	host, _ := os.Hostname()
	return Options{
		Hosts:                    []Host{{Hostname: "localhost", Port: 5672, Username: "guest", Password: "guest"}},
		VirtualHost:              "/",
		LoginMethod:              "AMQPLAIN",
		Heartbeat:                60 * time.Second,
		ReconnectInterval:        time.Second,
		ReconnectMax:             30 * time.Second,
		Exchange:                 "magnum",
		Topic:                    "magnum-conductor",
		ServerID:                 host,
		TransientQueuesTTL:       1800 * time.Second,
		ResponseTimeout:          60 * time.Second,
		MissingReplyQueueTimeout: 60 * time.Second,
		Fanout:                   true,
		Workers:                  16,
		DedupSize:                4096,
		ShutdownTimeout:          30 * time.Second,
		RetryMin:                 time.Second,
		RetryMax:                 time.Minute,
		RetryAttempts:            0,
		ConnectionName:           "magnum-capi-bridge",
	}
}

const rabbitSection = "oslo_messaging_rabbit"

// OptionsFromConfig reads the options that shape the wire from magnum.conf, exactly the keys
// the Python services read. As in oslo.messaging, options of
// [oslo_messaging_rabbit] given in the transport URL query (?ssl=1, ?amqp_durable_queues=true)
// override the file. Invalid values are errors naming the key.
func OptionsFromConfig(f *config.File) (Options, error) {
	o := DefaultOptions()
	var err error

	transportURL := f.String("DEFAULT", "transport_url", "rabbit://")
	tu, err := parseTransportURL(transportURL)
	if err != nil {
		return o, &config.Error{Section: "DEFAULT", Key: "transport_url", Reason: err.Error()}
	}
	o.VirtualHost = tu.vhost

	// get reads an [oslo_messaging_rabbit] option; the URL query overrides the file. It also
	// returns where the value came from, for error messages.
	get := func(key string) (val, section, name string, ok bool) {
		if v, inQuery := tu.query[key]; inQuery {
			return strings.TrimSpace(v), "DEFAULT", "transport_url", true
		}
		v, inFile := f.Lookup(rabbitSection, key)
		return v, rabbitSection, key, inFile && v != ""
	}
	fail := func(section, name, opt string, reason string) {
		if err != nil {
			return
		}
		if name == "transport_url" {
			reason = "query option " + opt + ": " + reason
		}
		err = &config.Error{Section: section, Key: name, Reason: reason}
	}
	boolOpt := func(dst *bool, keys ...string) {
		for _, key := range keys {
			v, sec, name, ok := get(key)
			if !ok {
				continue
			}
			b, perr := parseBool(v)
			if perr != nil {
				fail(sec, name, key, perr.Error())
				return
			}
			*dst = b
			return
		}
	}
	intOpt := func(dst *int, min int, keys ...string) {
		for _, key := range keys {
			v, sec, name, ok := get(key)
			if !ok {
				continue
			}
			n, perr := strconv.Atoi(v)
			switch {
			case perr != nil:
				fail(sec, name, key, fmt.Sprintf("%q is not an integer", v))
			case n < min:
				fail(sec, name, key, fmt.Sprintf("%d is below the minimum %d", n, min))
			default:
				*dst = n
			}
			return
		}
	}
	secondsOpt := func(dst *time.Duration, min int, keys ...string) {
		n := -1
		intOpt(&n, min, keys...)
		if n >= 0 {
			*dst = time.Duration(n) * time.Second
		}
	}
	strOpt := func(dst *string, key string) {
		if v, _, _, ok := get(key); ok {
			*dst = v
		}
	}

	boolOpt(&o.SSL, "ssl", "rabbit_use_ssl")
	strOpt(&o.SSLCAFile, "ssl_ca_file")
	strOpt(&o.SSLCertFile, "ssl_cert_file")
	strOpt(&o.SSLKeyFile, "ssl_key_file")
	strOpt(&o.SSLVersion, "ssl_version")
	strOpt(&o.LoginMethod, "rabbit_login_method")
	secondsOpt(&o.Heartbeat, 0, "heartbeat_timeout_threshold")
	secondsOpt(&o.ReconnectInterval, 0, "rabbit_retry_interval")
	secondsOpt(&o.ReconnectMax, 0, "rabbit_interval_max")
	boolOpt(&o.DurableQueues, "amqp_durable_queues")
	boolOpt(&o.AutoDelete, "amqp_auto_delete")
	boolOpt(&o.QuorumQueues, "rabbit_quorum_queue")
	intOpt(&o.QuorumDeliveryLimit, 0, "rabbit_quorum_delivery_limit")
	intOpt(&o.QuorumMaxMemoryLength, 0, "rabbit_quorum_max_memory_length", "rabbit_quroum_max_memory_length")
	intOpt(&o.QuorumMaxMemoryBytes, 0, "rabbit_quorum_max_memory_bytes", "rabbit_quroum_max_memory_bytes")
	boolOpt(&o.TransientQuorumQueues, "rabbit_transient_quorum_queue")
	boolOpt(&o.StreamFanout, "rabbit_stream_fanout")
	boolOpt(&o.HAQueues, "rabbit_ha_queues")
	secondsOpt(&o.TransientQueuesTTL, 0, "rabbit_transient_queues_ttl")
	intOpt(&o.PrefetchCount, 0, "rabbit_qos_prefetch_count")
	secondsOpt(&o.MissingReplyQueueTimeout, 0, "kombu_missing_consumer_retry_timeout")
	if err != nil {
		return o, err
	}

	o.LoginMethod = strings.ToUpper(o.LoginMethod)
	if o.LoginMethod != "AMQPLAIN" && o.LoginMethod != "PLAIN" {
		_, sec, key, _ := get("rabbit_login_method")
		return o, &config.Error{Section: sec, Key: key, Reason: fmt.Sprintf("%q is not supported (AMQPLAIN or PLAIN)", o.LoginMethod)}
	}
	if o.QuorumQueues && o.HAQueues {
		return o, &config.Error{Section: rabbitSection, Key: "rabbit_quorum_queue",
			Reason: "rabbit_quorum_queue and rabbit_ha_queues are both enabled; a queue is quorum or mirrored, not both"}
	}
	if o.StreamFanout && !o.TransientQuorumQueues {
		return o, &config.Error{Section: rabbitSection, Key: "rabbit_stream_fanout", Reason: "needs rabbit_transient_quorum_queue = true"}
	}
	if o.StreamFanout && o.PrefetchCount <= 0 {
		return o, &config.Error{Section: rabbitSection, Key: "rabbit_stream_fanout", Reason: "needs rabbit_qos_prefetch_count > 0"}
	}

	// Hosts: a host without credentials gets guest/guest only when the URL names no host at all,
	// as kombu does for "rabbit://".
	o.Hosts = nil
	for _, h := range tu.hosts {
		port := h.Port
		if port == 0 {
			port = 5672
			if o.SSL {
				port = 5671
			}
		}
		o.Hosts = append(o.Hosts, Host{Hostname: h.Hostname, Port: port, Username: h.Username, Password: h.Password})
	}
	if len(o.Hosts) == 0 {
		port := 5672
		if o.SSL {
			port = 5671
		}
		o.Hosts = []Host{{Hostname: "localhost", Port: port, Username: "guest", Password: "guest"}}
	}

	if o.SSL {
		if _, terr := o.tlsConfig(""); terr != nil {
			return o, terr
		}
	}

	o.Exchange = f.String("DEFAULT", "control_exchange", "magnum")
	if o.Exchange == "" {
		return o, &config.Error{Section: "DEFAULT", Key: "control_exchange", Reason: "must not be empty"}
	}
	o.Topic = f.String("conductor", "topic", "magnum-conductor")
	if o.Topic == "" {
		return o, &config.Error{Section: "conductor", Key: "topic", Reason: "must not be empty"}
	}
	if host := f.String("DEFAULT", "host", ""); host != "" {
		o.ServerID = host
	}
	if o.ServerID == "" {
		o.ServerID = "magnum-capi-bridge"
	}
	timeout, terr := f.Int("DEFAULT", "rpc_response_timeout", 60, 0, 0)
	if terr != nil {
		return o, terr
	}
	if timeout <= 0 {
		return o, &config.Error{Section: "DEFAULT", Key: "rpc_response_timeout", Reason: fmt.Sprintf("%d is not a positive number of seconds", timeout)}
	}
	o.ResponseTimeout = time.Duration(timeout) * time.Second
	return o, nil
}

// parseBool accepts oslo.config's boolean spellings.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on", "y", "t":
		return true, nil
	case "false", "0", "no", "off", "n", "f":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}

type transportURL struct {
	hosts []Host
	vhost string
	query map[string]string
}

// parseTransportURL follows oslo_messaging.TransportURL.parse:
// rabbit://user:pass@host:port[,userN:passN@hostN:portN]/vhost?query, with user and password
// percent-decoded, the vhost percent-decoded from the path ("" → "/"), IPv6 hosts in brackets.
func parseTransportURL(raw string) (*transportURL, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return nil, errors.New("no scheme (expected rabbit://…)")
	}
	switch strings.TrimPrefix(scheme, "kombu+") {
	case "rabbit", "kombu", "amqp", "pyamqp":
	default:
		return nil, fmt.Errorf("transport %q is not supported (rabbit:// only)", scheme)
	}
	tu := &transportURL{vhost: "/", query: map[string]string{}}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		q, err := url.ParseQuery(rest[i+1:])
		if err != nil {
			return nil, fmt.Errorf("bad query: %v", err)
		}
		for k, v := range q {
			tu.query[k] = strings.Join(v, ",")
		}
		rest = rest[:i]
	}
	netloc, path, _ := strings.Cut(rest, "/")
	if path != "" {
		tu.vhost = unquote(path)
	}
	for _, part := range strings.Split(netloc, ",") {
		if part == "" {
			continue
		}
		var h Host
		hostport := part
		if at := strings.LastIndexByte(part, '@'); at >= 0 {
			userinfo := part[:at]
			hostport = part[at+1:]
			user, pass, hasPass := strings.Cut(userinfo, ":")
			h.Username = unquote(user)
			if hasPass {
				h.Password = unquote(pass)
			}
		}
		host, portText := hostport, ""
		if strings.HasPrefix(hostport, "[") {
			end := strings.IndexByte(hostport, ']')
			if end < 0 {
				return nil, errors.New("invalid IPv6 host")
			}
			host = hostport[1:end]
			if after := hostport[end+1:]; strings.HasPrefix(after, ":") {
				portText = after[1:]
			}
		} else if i := strings.IndexByte(hostport, ':'); i >= 0 {
			host, portText = hostport[:i], hostport[i+1:]
		}
		if portText != "" {
			p, err := strconv.Atoi(portText)
			if err != nil || p <= 0 || p > 65535 {
				return nil, fmt.Errorf("bad port %q", portText)
			}
			h.Port = p
		}
		if host == "" {
			host = "localhost"
		}
		h.Hostname = host
		tu.hosts = append(tu.hosts, h)
	}
	return tu, nil
}

// unquote decodes %XX sequences like Python's urllib.parse.unquote: malformed ones stay as
// they are (a password may well contain a literal "%"), and "+" is not a space.
func unquote(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s)+0 && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// String describes the options for logs, with every password redacted.
func (o Options) String() string {
	var hosts []string
	for _, h := range o.Hosts {
		user := h.Username
		if h.Password != "" {
			user += ":***"
		}
		hosts = append(hosts, fmt.Sprintf("%s@%s", user, net.JoinHostPort(h.Hostname, strconv.Itoa(h.Port))))
	}
	return fmt.Sprintf("rpc.Options{hosts=[%s] vhost=%q ssl=%t login=%s exchange=%q topic=%q server=%q durable=%t auto_delete=%t quorum=%t ha=%t prefetch=%d}",
		strings.Join(hosts, ","), o.VirtualHost, o.SSL, o.LoginMethod, o.Exchange, o.Topic, o.ServerID,
		o.durable(), o.AutoDelete, o.QuorumQueues, o.HAQueues, o.PrefetchCount)
}

// GoString and Format keep %#v / %+v redacted as well.
func (o Options) GoString() string { return o.String() }

// Format makes every fmt verb use the redacted String.
func (o Options) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(o.String())) }

// LogValue implements slog.LogValuer.
func (o Options) LogValue() slog.Value { return slog.StringValue(o.String()) }

// String redacts the password of a Host.
func (h Host) String() string {
	return fmt.Sprintf("%s:***@%s", h.Username, net.JoinHostPort(h.Hostname, strconv.Itoa(h.Port)))
}

// GoString keeps %#v redacted.
func (h Host) GoString() string { return h.String() }

// Format makes every fmt verb use the redacted String.
func (h Host) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(h.String())) }

// ---- declarations -----------------------------------------------------------------------------

// durable mirrors oslo's Connection.durable: amqp_durable_queues or rabbit_quorum_queue.
func (o *Options) durable() bool { return o.DurableQueues || o.QuorumQueues }

// queueArgs mirrors oslo.messaging's _get_queue_arguments.
func (o *Options) queueArgs(quorum bool, ttl time.Duration) amqp.Table {
	args := amqp.Table{}
	if o.HAQueues {
		args["x-ha-policy"] = "all"
	}
	if quorum {
		args["x-queue-type"] = "quorum"
		if o.QuorumDeliveryLimit > 0 {
			args["x-delivery-limit"] = amqpInt(o.QuorumDeliveryLimit)
		}
		if o.QuorumMaxMemoryLength > 0 {
			args["x-max-in-memory-length"] = amqpInt(o.QuorumMaxMemoryLength)
		}
		if o.QuorumMaxMemoryBytes > 0 {
			args["x-max-in-memory-bytes"] = amqpInt(o.QuorumMaxMemoryBytes)
		}
	}
	if ttl > 0 {
		args["x-expires"] = amqpInt(int(ttl / time.Millisecond))
	}
	return args
}

// amqpInt encodes integers as py-amqp does: a 32-bit signed int when it fits, else 64-bit.
func amqpInt(n int) any {
	if n >= -1<<31 && n < 1<<31 {
		return int32(n)
	}
	return int64(n)
}

// exchangeDecl / queueDecl describe one declaration.
type exchangeDecl struct {
	Name, Kind          string
	Durable, AutoDelete bool
}

type queueDecl struct {
	Name                string
	Durable, AutoDelete bool
	Args                amqp.Table
	// Exchange and Key bind the queue (none for reply queues on the default exchange).
	Exchange, Key string
}

// topicExchange is the control exchange (declare_topic_consumer / topic_send).
func (o *Options) topicExchange() exchangeDecl {
	return exchangeDecl{Name: o.Exchange, Kind: amqp.ExchangeTopic, Durable: o.durable(), AutoDelete: o.AutoDelete}
}

// topicQueue is a topic consumer's queue: <topic> or <topic>.<server>.
func (o *Options) topicQueue(name string) queueDecl {
	return queueDecl{Name: name, Durable: o.durable(), AutoDelete: o.AutoDelete,
		Args: o.queueArgs(o.QuorumQueues, 0), Exchange: o.Exchange, Key: name}
}

// notificationQueue is the queue oslo's rabbit driver declares before publishing a notification
// (_publish_and_creates_default_queue): named after the routing key <topic>.<priority>, bound to
// the control exchange, with the exchange's durability.
func (o *Options) notificationQueue(key string) queueDecl { return o.topicQueue(key) }

// fanoutExchange is <topic>_fanout (declare_fanout_consumer / fanout_send).
func (o *Options) fanoutExchange() exchangeDecl {
	durable := o.TransientQuorumQueues || o.StreamFanout
	return exchangeDecl{Name: o.Topic + "_fanout", Kind: amqp.ExchangeFanout, Durable: durable, AutoDelete: true}
}

// fanoutQueue is <topic>_fanout_<unique>, or the single stream <topic>_fanout.
func (o *Options) fanoutQueue(unique string) queueDecl {
	q := queueDecl{Name: o.Topic + "_fanout_" + unique, Durable: o.TransientQuorumQueues,
		Args: o.queueArgs(o.TransientQuorumQueues, o.TransientQueuesTTL), Exchange: o.Topic + "_fanout", Key: o.Topic}
	if o.StreamFanout {
		q.Name = o.Topic + "_fanout"
		q.Durable = true
		q.Args = amqp.Table{"x-queue-type": "stream"}
		if o.TransientQueuesTTL > 0 {
			q.Args["x-max-age"] = fmt.Sprintf("%ds", int(o.TransientQueuesTTL/time.Second))
		}
	}
	return q
}

// replyQueue is a client's reply_<uuid> (declare_direct_consumer).
func (o *Options) replyQueue(name string) queueDecl {
	return queueDecl{Name: name, Durable: o.TransientQuorumQueues, Args: o.queueArgs(o.TransientQuorumQueues, o.TransientQueuesTTL)}
}

// parkingQueue is this project's own durable queue for malformed casts.
func (o *Options) parkingQueue() queueDecl {
	name := o.ParkingQueue
	if name == "" {
		name = o.Topic + ".parked"
	}
	return queueDecl{Name: name, Durable: true, Args: amqp.Table{}}
}

func declareExchange(ch *amqp.Channel, e exchangeDecl) error {
	if err := ch.ExchangeDeclare(e.Name, e.Kind, e.Durable, e.AutoDelete, false, false, nil); err != nil {
		return explainDeclareError("exchange", e.Name, err)
	}
	return nil
}

func declareQueue(ch *amqp.Channel, q queueDecl) error {
	if _, err := ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, false, false, q.Args); err != nil {
		return explainDeclareError("queue", q.Name, err)
	}
	if q.Exchange != "" {
		if err := ch.QueueBind(q.Name, q.Key, q.Exchange, false, nil); err != nil {
			return fmt.Errorf("rpc: bind queue %s to %s: %w", q.Name, q.Exchange, err)
		}
	}
	return nil
}

// errDeclarationMismatch marks a 406 on declare: the broker already has the entity with other
// flags, a configuration mismatch that retrying cannot fix.
var errDeclarationMismatch = errors.New("declaration differs from the existing entity")

func explainDeclareError(kind, name string, err error) error {
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
		return fmt.Errorf("rpc: declare %s %s: %w: %s (make [oslo_messaging_rabbit] amqp_durable_queues, amqp_auto_delete, rabbit_quorum_queue, rabbit_ha_queues and rabbit_transient_queues_ttl equal to the Python services')",
			kind, name, errDeclarationMismatch, aerr.Reason)
	}
	return fmt.Errorf("rpc: declare %s %s: %w", kind, name, err)
}

// ---- dialing ------------------------------------------------------------------------------------

// tlsConfig builds the TLS settings from ssl_* (errors name the key). A CA file replaces the
// system pool, as in the Python services' AMQP driver.
func (o *Options) tlsConfig(serverName string) (*tls.Config, error) {
	topts := tlsclient.Options{ServerName: serverName, CAFile: o.SSLCAFile}
	switch strings.ToLower(o.SSLVersion) {
	case "", "sslv23", "tls", "tlsv1_2":
	case "tlsv1":
		topts.MinVersion = tls.VersionTLS10
	case "tlsv1_1":
		topts.MinVersion = tls.VersionTLS11
	case "tlsv1_3":
		topts.MinVersion = tls.VersionTLS13
	default:
		return nil, &config.Error{Section: rabbitSection, Key: "ssl_version", Reason: fmt.Sprintf("%q is not a known TLS version", o.SSLVersion)}
	}
	paired := (o.SSLCertFile == "") == (o.SSLKeyFile == "")
	if paired {
		topts.CertFile, topts.KeyFile = o.SSLCertFile, o.SSLKeyFile
	}
	cfg, err := tlsclient.Config(topts)
	// The CA file is reported first, then an unpaired certificate, then one that does not load.
	var te *tlsclient.Error
	if errors.As(err, &te) && te.Part == tlsclient.PartCA {
		return nil, &config.Error{Section: rabbitSection, Key: "ssl_ca_file", Reason: te.Err.Error()}
	}
	if !paired {
		key := "ssl_cert_file"
		if o.SSLKeyFile == "" {
			key = "ssl_key_file"
		}
		return nil, &config.Error{Section: rabbitSection, Key: key, Reason: "ssl_cert_file and ssl_key_file must be set together"}
	}
	if errors.As(err, &te) {
		return nil, &config.Error{Section: rabbitSection, Key: "ssl_cert_file", Reason: te.Err.Error()}
	}
	return cfg, err
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

func (o *Options) validate() error {
	if len(o.Hosts) == 0 {
		return errors.New("rpc: no broker host")
	}
	if o.Exchange == "" || o.Topic == "" {
		return errors.New("rpc: exchange and topic must be set")
	}
	if o.LoginMethod != "" && o.LoginMethod != "AMQPLAIN" && o.LoginMethod != "PLAIN" {
		return fmt.Errorf("rpc: login method %q is not supported", o.LoginMethod)
	}
	if o.QuorumQueues && o.HAQueues {
		return errors.New("rpc: rabbit_quorum_queue and rabbit_ha_queues are exclusive")
	}
	if o.StreamFanout && (o.PrefetchCount <= 0 || !o.TransientQuorumQueues) {
		return errors.New("rpc: rabbit_stream_fanout needs rabbit_qos_prefetch_count > 0 and rabbit_transient_quorum_queue")
	}
	return nil
}

// dialHost opens one connection to one host.
func (o *Options) dialHost(ctx context.Context, h Host, purpose string) (*amqp.Connection, error) {
	scheme := "amqp"
	var tlsCfg *tls.Config
	if o.SSL {
		scheme = "amqps"
		var err error
		if tlsCfg, err = o.tlsConfig(h.Hostname); err != nil {
			return nil, configError{err}
		}
	}
	var auth amqp.Authentication = &amqp.AMQPlainAuth{Username: h.Username, Password: h.Password}
	if o.LoginMethod == "PLAIN" {
		auth = &amqp.PlainAuth{Username: h.Username, Password: h.Password}
	}
	vhost := o.VirtualHost
	if vhost == "" {
		vhost = "/"
	}
	props := amqp.NewConnectionProperties()
	name := o.ConnectionName
	if name == "" {
		name = "magnum-capi-bridge"
	}
	props.SetClientConnectionName(fmt.Sprintf("%s:%d:%s", name, os.Getpid(), purpose))
	// The heartbeat goes in the URI: it is the only place where amqp091 takes 0 literally
	// instead of substituting its 10 s default. 0 (Python: no heartbeat) then means "the
	// broker's interval", because amqp091 cannot switch heartbeats off on its own.
	addr := fmt.Sprintf("%s://%s/?heartbeat=%d", scheme, net.JoinHostPort(h.Hostname, strconv.Itoa(h.Port)),
		int(o.Heartbeat/time.Second))
	return amqp.DialConfig(addr, amqp.Config{
		SASL:            []amqp.Authentication{auth},
		Vhost:           vhost,
		TLSClientConfig: tlsCfg,
		Properties:      props,
		Dial:            dialContext(ctx, 15*time.Second),
	})
}

// dialContext is amqp.DefaultDial with the TCP connect bound to ctx.
func dialContext(ctx context.Context, timeout time.Duration) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// Bound the TLS and AMQP handshake; amqp091 clears the deadline once open.
		if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}
}
