package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/pyjson"
)

// Notification is one oslo.messaging notification (the "messagingv2" driver's format): what
// Python services send with Notifier.info/error, and what notification listeners (Ceilometer,
// billing) consume.
type Notification struct {
	// PublisherID is e.g. "container-infra.<host>", as Magnum's rpc.get_notifier() names it.
	PublisherID string
	EventType   string // e.g. magnum.cluster.create
	// Priority is INFO, ERROR, … (upper case, as on the wire); the routing key is
	// <topic>.<priority in lower case>.
	Priority string
	// Payload is the JSON payload.
	Payload json.RawMessage
	// Context is the request context the notification is about; nil sends an empty one. Its
	// secrets (auth_token, auth_token_info, password, trust_id, …) are sent as null, like
	// oslo.context's redacted_copy().
	Context *Context
	// Time defaults to now.
	Time time.Time
	// Version1 sends the message without the 2.0 envelope (the "messaging" driver).
	Version1 bool
}

// EncodeNotification builds the message body exactly as oslo.messaging's notifier and rabbit
// driver do: {"message_id", "publisher_id", "event_type", "priority", "payload", "timestamp"}
// plus "_unique_id" and the "_context_*" keys, in the 2.0 envelope.
func EncodeNotification(n *Notification) ([]byte, error) {
	if n.EventType == "" || n.Priority == "" {
		return nil, errors.New("rpc: a notification needs an event type and a priority")
	}
	payload := n.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if !json.Valid(payload) {
		return nil, errors.New("rpc: notification payload is not valid JSON")
	}
	at := n.Time
	if at.IsZero() {
		at = time.Now()
	}
	buf := make([]byte, 0, 2048+len(payload))
	buf = append(buf, `{"message_id": `...)
	buf = pyjson.AppendString(buf, newUUID4())
	buf = append(buf, `, "publisher_id": `...)
	buf = pyjson.AppendString(buf, n.PublisherID)
	buf = append(buf, `, "event_type": `...)
	buf = pyjson.AppendString(buf, n.EventType)
	buf = append(buf, `, "priority": `...)
	buf = pyjson.AppendString(buf, n.Priority)
	buf = append(buf, `, "payload": `...)
	var err error
	if buf, err = pyjson.AppendValue(buf, payload); err != nil {
		return nil, fmt.Errorf("rpc: encode notification payload: %w", err)
	}
	buf = append(buf, `, "timestamp": `...)
	// str(timeutils.utcnow()): "2006-01-02 15:04:05.999999" (no zone; no fraction when zero).
	ts := at.UTC().Format("2006-01-02 15:04:05.000000")
	ts = strings.TrimSuffix(ts, ".000000")
	buf = pyjson.AppendString(buf, ts)
	buf = append(buf, `, "_unique_id": `...)
	buf = pyjson.AppendString(buf, newUUIDHex())
	for _, m := range n.Context.members() {
		v := m.Value
		if isRedactedInNotifications(m.Key) {
			v = json.RawMessage("null")
		}
		buf = append(buf, ", "...)
		buf = pyjson.AppendString(buf, contextKeyPrefix+m.Key)
		buf = append(buf, ": "...)
		if buf, err = pyjson.AppendValue(buf, v); err != nil {
			return nil, fmt.Errorf("rpc: encode context key %s: %w", m.Key, err)
		}
	}
	buf = append(buf, '}')
	if n.Version1 {
		return buf, nil
	}
	return wrapEnvelope(buf), nil
}

func isRedactedInNotifications(key string) bool {
	switch key {
	case "auth_token", "auth_token_info", "password", "trust_id", "service_token":
		return true
	}
	return !knownContextKeys[key] && isSecretContextKey(key)
}

// newUUID4 is str(uuid.uuid4()).
func newUUID4() string {
	h := newUUIDHex()
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Notifier publishes notifications on the transport's exchange ([DEFAULT] control_exchange),
// routing key <topic>.<priority>, declaring that queue first as oslo's rabbit driver does, so
// notifications wait for a listener that is not running yet.
type Notifier struct {
	opts   Options
	topics []string
	pub    *publisher
}

// NewNotifier returns a notifier for the given topics ([oslo_messaging_notifications] topics,
// default "notifications"); it connects on first use.
func NewNotifier(opts Options, topics []string) (*Notifier, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if len(topics) == 0 {
		topics = []string{"notifications"}
	}
	n := &Notifier{opts: opts, topics: topics}
	n.pub = newPublisher(&n.opts, "notify")
	return n, nil
}

// Notify sends n to every topic; it retries across reconnects until ctx ends.
func (n *Notifier) Notify(ctx context.Context, note *Notification) error {
	body, err := EncodeNotification(note)
	if err != nil {
		return err
	}
	ex := n.opts.topicExchange()
	var errs []error
	for _, topic := range n.topics {
		key := topic + "." + strings.ToLower(note.Priority)
		q := n.opts.notificationQueue(key)
		err := n.pub.publishDeclaring(ctx, &ex, &q, key, amqp.Publishing{
			ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body,
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close closes the notifier's connection.
func (n *Notifier) Close() { n.pub.close() }
