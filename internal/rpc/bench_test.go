package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc/rpctest"
)

// The benchmarks compare the server/client against a bare amqp091-go loop doing the same broker
// work (publisher confirms, manual acks, a reply publish per call) with the same message sizes,
// so that the ratio shows what the oslo codec, dispatch, dedup and scheduling cost.
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/rpc/

func benchOptions(b *testing.B) Options {
	o, _ := testOptions(b, sharedBroker(b))
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

// benchCall is a realistic call: the captured get_ca_certificate (~7.4 KB, Cluster object and a
// full token body in the context).
func benchCall(b *testing.B) *Message {
	for _, f := range loadFixtures(b, "request") {
		if f.release == "magnum-15.0.1" && f.name == "ca_show" {
			m, err := DecodeMessage(f.body)
			if err != nil {
				b.Fatal(err)
			}
			m.UniqueID, m.MsgID, m.ReplyQ = "", "", ""
			return m
		}
	}
	b.Fatal("fixture ca_show not found")
	return nil
}

var benchCert = json.RawMessage(`{"magnum_object.name": "Certificate", "magnum_object.namespace": "magnum", "magnum_object.version": "1.2", "magnum_object.data": {"pem": "-----BEGIN CERTIFICATE-----\nMIIC1zCCAb+gAwIBAgIRAOMVeOjw40uhsBtEo3A00McwDQYJKoZIhvcNAQELBQAw\n-----END CERTIFICATE-----"}}`)

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := int(float64(len(lat)-1) * p)
		return float64(lat[i].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func BenchmarkCallRoundTrip(b *testing.B) {
	o := benchOptions(b)
	startServer(b, o, map[string]Handler{
		"get_ca_certificate": func(context.Context, *Request) (any, error) { return benchCert, nil },
	})
	c := newClient(b, o)
	m := benchCall(b)
	ctx := context.Background()
	if _, err := c.CallMessage(ctx, m, 10*time.Second); err != nil { // warm up connections
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := c.CallMessage(ctx, m, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func BenchmarkCastThroughput(b *testing.B) {
	o := benchOptions(b)
	var handled atomic.Int64
	all := make(chan struct{})
	target := int64(b.N)
	startServer(b, o, map[string]Handler{
		"cluster_delete": func(context.Context, *Request) (any, error) {
			if handled.Add(1) == target {
				close(all)
			}
			return nil, nil
		},
	})
	c := newClient(b, o)
	ctx := testContext()
	b.ResetTimer()
	start := time.Now()
	publishParallel(b, b.N, func(i int) error {
		return c.Cast(context.Background(), "cluster_delete", json.RawMessage(fmt.Sprintf(`{"uuid": "c-%d"}`, i)), ctx)
	})
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d casts handled", handled.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// publishParallel publishes n messages from 4 goroutines (each waits for its confirms).
func publishParallel(b *testing.B, n int, publish func(i int) error) {
	const publishers = 4
	var next atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := publish(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// rawLoop is the baseline: plain amqp091 with confirms and manual acks.
type rawLoop struct {
	conn    *amqp.Connection
	pub     *amqp.Channel
	pubMu   sync.Mutex
	reqQ    string
	replyQ  string
	replies <-chan amqp.Delivery
}

func newRawLoop(b *testing.B, br *rpctest.Broker, reply bool, handle func(d amqp.Delivery, ch *amqp.Channel)) *rawLoop {
	conn := br.Dial(b)
	suffix := rpctest.RandomSuffix()
	r := &rawLoop{conn: conn, reqQ: "mcbbench-req-" + suffix, replyQ: "mcbbench-reply-" + suffix}
	setup, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{r.reqQ, r.replyQ} {
		if _, err := setup.QueueDeclare(q, false, true, false, false, nil); err != nil {
			b.Fatal(err)
		}
	}
	if r.pub, err = conn.Channel(); err != nil {
		b.Fatal(err)
	}
	if err := r.pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	// The "server": its own connection, like ours.
	sconn := br.Dial(b)
	sch, err := sconn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := sch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	deliveries, err := sch.Consume(r.reqQ, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for d := range deliveries {
			handle(d, sch)
		}
	}()
	if reply {
		rch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if r.replies, err = rch.Consume(r.replyQ, "", true, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

func (r *rawLoop) publish(ch *amqp.Channel, key string, body []byte, mandatory bool) error {
	dc, err := ch.PublishWithDeferredConfirm("", key, mandatory, false, amqp.Publishing{
		ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body})
	if err != nil {
		return err
	}
	if !dc.Wait() {
		return fmt.Errorf("nacked")
	}
	return nil
}

func BenchmarkRawAMQPRoundTrip(b *testing.B) {
	m := benchCall(b)
	m.UniqueID, m.MsgID, m.ReplyQ = newUUIDHex(), newUUIDHex(), "reply_x"
	body, err := EncodeMessage(m)
	if err != nil {
		b.Fatal(err)
	}
	replyBody, _ := EncodeReply(&Reply{Result: benchCert, Ending: true, MsgID: m.MsgID, UniqueID: newUUIDHex()})
	var r *rawLoop
	r = newRawLoop(b, sharedBroker(b), true, func(d amqp.Delivery, ch *amqp.Channel) {
		_ = r.publish(ch, r.replyQ, replyBody, true)
		_ = d.Ack(false)
	})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := r.publish(r.pub, r.reqQ, body, false); err != nil {
			b.Fatal(err)
		}
		select {
		case <-r.replies:
		case <-time.After(10 * time.Second):
			b.Fatal("no raw reply")
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func BenchmarkRawAMQPThroughput(b *testing.B) {
	m := &Message{Method: "cluster_delete", ArgsRaw: json.RawMessage(`{"uuid": "c-0"}`), UniqueID: newUUIDHex(), Context: testContext()}
	body, err := EncodeMessage(m)
	if err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	all := make(chan struct{})
	target := int64(b.N)
	r := newRawLoop(b, sharedBroker(b), false, func(d amqp.Delivery, ch *amqp.Channel) {
		_ = d.Ack(false)
		if handled.Add(1) == target {
			close(all)
		}
	})
	b.ResetTimer()
	start := time.Now()
	publishParallel(b, b.N, func(int) error {
		// One channel, like our client's publisher; confirms are awaited outside the lock.
		r.pubMu.Lock()
		dc, err := r.pub.PublishWithDeferredConfirm("", r.reqQ, false, false, amqp.Publishing{
			ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body})
		r.pubMu.Unlock()
		if err != nil {
			return err
		}
		if !dc.Wait() {
			return fmt.Errorf("nacked")
		}
		return nil
	})
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d handled", handled.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}
