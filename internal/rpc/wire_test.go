package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc/rpctest"
)

// TestClientReproducesCapturedMessages publishes every captured magnum-api request through
// Client and reads it back from the broker: the body is byte-identical to the capture once the
// per-call _msg_id and _reply_q are swapped back, and the AMQP properties are the captured ones.
func TestClientReproducesCapturedMessages(t *testing.T) {
	b := rpctestNewVhost(t)
	o, _ := testOptions(t, b)
	if b.Isolated {
		// A vhost of our own: use magnum's real names, as on the captured wire.
		o.Exchange, o.Topic = "magnum", "magnum-conductor"
	}
	conn := b.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := declareExchange(ch, o.topicExchange()); err != nil {
		t.Fatal(err)
	}
	// The capture tool's tap: a queue bound with '#'.
	tap, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(tap.Name, "#", o.Exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(tap.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, o)

	for _, f := range loadFixtures(t, "request") {
		m, err := DecodeMessage(f.body)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		if m.IsCall() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = c.CallMessage(ctx, m, 60*time.Second) // nobody answers; cancelled below
			}()
		} else if err := c.CastMessage(ctx, m); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		var d amqp.Delivery
		select {
		case d = <-deliveries:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing published", f.name)
		}
		cancel()
		wg.Wait()

		body := d.Body
		if m.IsCall() {
			sent, err := DecodeMessage(body)
			if err != nil {
				t.Fatal(err)
			}
			if len(sent.MsgID) != 32 || sent.MsgID == m.MsgID || sent.ReplyQ != c.ReplyQueue() {
				t.Fatalf("%s: call ids %q %q", f.name, sent.MsgID, sent.ReplyQ)
			}
			body = bytes.Replace(body, []byte(sent.MsgID), []byte(m.MsgID), 1)
			body = bytes.Replace(body, []byte(sent.ReplyQ), []byte(m.ReplyQ), 1)
		}
		if !bytes.Equal(body, f.body) {
			t.Fatalf("%s/%s: published body differs from magnum-api's\n got %.400s\nwant %.400s", f.release, f.name, body, f.body)
		}
		p := f.props.Properties
		wantExp := ""
		if p.Expiration != nil {
			wantExp = *p.Expiration
		}
		if d.ContentType != p.ContentType || d.ContentEncoding != p.ContentEncoding || d.DeliveryMode != p.DeliveryMode ||
			d.Expiration != wantExp || d.Priority != p.Priority || len(d.Headers) != len(p.Headers) ||
			d.CorrelationId != "" || d.ReplyTo != "" || d.MessageId != "" || d.Type != "" || d.AppId != "" || !d.Timestamp.IsZero() {
			t.Fatalf("%s: properties %+v differ from the capture %+v", f.name, deliveryProps(d), p)
		}
		if b.Isolated && (d.Exchange != f.props.Exchange || d.RoutingKey != f.props.RoutingKey) {
			t.Fatalf("%s: published to %s/%s, magnum-api to %s/%s", f.name, d.Exchange, d.RoutingKey, f.props.Exchange, f.props.RoutingKey)
		}
	}
}

func deliveryProps(d amqp.Delivery) string {
	return fmt.Sprintf("content_type=%q encoding=%q mode=%d expiration=%q priority=%d headers=%v", d.ContentType,
		d.ContentEncoding, d.DeliveryMode, d.Expiration, d.Priority, d.Headers)
}

// TestBrokerRestartMidStream restarts a private RabbitMQ node while a client streams durable
// casts into a durable queue: every message is handled, none twice.
func TestBrokerRestartMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a private RabbitMQ node (about 30 s)")
	}
	node := rpctest.StartNode(t)
	o, _ := testOptions(t, &node.Broker)
	o.DurableQueues = true
	o.ReconnectMax = time.Second
	const total, restartAfter = 400, 150

	var mu sync.Mutex
	runs := map[int]int{}
	var handledDistinct atomic.Int32
	// Messages from gateSeq on wait until the broker has been restarted, so that a backlog of
	// queued and unacknowledged (some of them running) messages exists when it stops.
	const gateSeq = 100
	gate := make(chan struct{})
	srv := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			var seq int
			if _, err := r.Arg("seq", &seq); err != nil {
				return nil, err
			}
			if seq >= gateSeq {
				<-gate
			}
			mu.Lock()
			runs[seq]++
			if runs[seq] == 1 {
				handledDistinct.Add(1)
			}
			mu.Unlock()
			return nil, nil
		},
	})
	c := newClient(t, o)

	var sent atomic.Int32
	streamErr := make(chan error, 1)
	go func() {
		for i := 0; i < total; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			args := json.RawMessage(fmt.Sprintf(`{"uuid": "cluster-%d", "seq": %d}`, i%7, i))
			err := c.Cast(ctx, "cluster_update", args, testContext())
			cancel()
			if err != nil {
				streamErr <- fmt.Errorf("cast %d: %w", i, err)
				return
			}
			sent.Add(1)
		}
		streamErr <- nil
	}()

	require.Eventually(t, func() bool { return sent.Load() >= restartAfter }, time.Minute, 20*time.Millisecond, "first part of the stream")
	require.Eventually(t, func() bool { return handledDistinct.Load() == gateSeq }, time.Minute, 20*time.Millisecond, "messages before the gate handled")
	restartStart := time.Now()
	backlog := sent.Load() - handledDistinct.Load()
	node.Stop(t)
	sentWhileDown := sent.Load()
	time.Sleep(time.Second)
	node.Start(t)
	close(gate)
	t.Logf("broker restarted in %s; %d casts confirmed before the stop, %d of them not yet handled",
		time.Since(restartStart).Round(time.Millisecond), sentWhileDown, backlog)

	select {
	case err := <-streamErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("stream did not finish")
	}
	require.Eventually(t, func() bool { return handledDistinct.Load() == total }, 2*time.Minute, 20*time.Millisecond, "every cast handled")
	mu.Lock()
	defer mu.Unlock()
	for seq := 0; seq < total; seq++ {
		if runs[seq] != 1 {
			t.Errorf("seq %d handled %d times", seq, runs[seq])
		}
	}
	st := srv.Stats()
	if st.Sessions < 2 {
		t.Fatalf("the server never reconnected: %+v", st)
	}
	t.Logf("server stats after restart: %+v", st)
	// The private node can also cut connections (rpctest drives it with its own cookie).
	node.CloseConnections(t, "test: private node disconnect")
	require.Eventually(t, func() bool { return srv.Stats().Sessions > st.Sessions }, 30*time.Second, 20*time.Millisecond, "reconnect after a forced close")
}
