package rpc

import (
	"bytes"
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
//	go test -tags integration -run '^$' -bench . -benchtime 2000x ./internal/rpc/

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

// castSink starts a server whose cluster_delete handler counts casts; wait blocks until n were
// handled (at most 5 minutes).
func castSink(b *testing.B, o Options, n int) (wait func()) {
	var handled atomic.Int64
	all := make(chan struct{})
	startServer(b, o, map[string]Handler{
		"cluster_delete": func(context.Context, *Request) (any, error) {
			if handled.Add(1) == int64(n) {
				close(all)
			}
			return nil, nil
		},
	})
	return func() {
		select {
		case <-all:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d casts handled", handled.Load(), n)
		}
	}
}

func BenchmarkCastThroughput(b *testing.B) {
	o := benchOptions(b)
	wait := castSink(b, o, b.N)
	c := newClient(b, o)
	ctx := testContext()
	b.ResetTimer()
	start := time.Now()
	publishParallel(b, b.N, func(i int) error {
		return c.Cast(context.Background(), "cluster_delete", json.RawMessage(fmt.Sprintf(`{"uuid": "c-%d"}`, i)), ctx)
	})
	wait()
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

// rawLoop is the baseline: plain amqp091 with confirms and manual acks. Its requests travel as
// oslo's do, through a topic exchange bound to the request queue (magnum-api publishes to the
// "magnum" exchange; the broker's routing is part of the work), unless it was made with
// defaultExchange, which publishes straight to the queue.
type rawLoop struct {
	conn     *amqp.Connection
	pub      *amqp.Channel
	pubMu    sync.Mutex
	exchange string
	reqQ     string
	replyQ   string
	replies  <-chan amqp.Delivery
}

// sendRequest publishes one request body the loop's way and waits for its confirm.
func (r *rawLoop) sendRequest(body []byte) error {
	r.pubMu.Lock()
	dc, err := r.pub.PublishWithDeferredConfirm(r.exchange, r.reqQ, false, false, amqp.Publishing{
		ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body})
	r.pubMu.Unlock()
	if err != nil {
		return err
	}
	if !dc.Wait() {
		return fmt.Errorf("nacked")
	}
	return nil
}

func newRawLoop(b *testing.B, br *rpctest.Broker, reply, defaultExchange bool, handle func(d amqp.Delivery, ch *amqp.Channel)) *rawLoop {
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
	if !defaultExchange {
		r.exchange = "mcbbench-topic-" + suffix
		if err := setup.ExchangeDeclare(r.exchange, "topic", false, true, false, false, nil); err != nil {
			b.Fatal(err)
		}
		if err := setup.QueueBind(r.reqQ, r.reqQ, r.exchange, false, nil); err != nil {
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

// rawCallBodies are the raw loops' request (the captured call, as magnum-api encodes it) and reply.
func rawCallBodies(b *testing.B) (request, reply []byte) {
	m := benchCall(b)
	m.UniqueID, m.MsgID, m.ReplyQ = newUUIDHex(), newUUIDHex(), "reply_x"
	request, err := EncodeMessage(m)
	if err != nil {
		b.Fatal(err)
	}
	reply, _ = EncodeReply(&Reply{Result: benchCert, Ending: true, MsgID: m.MsgID, UniqueID: newUUIDHex()})
	return request, reply
}

// roundTrips sends body b.N times, each after the previous reply, and reports the percentiles.
func (r *rawLoop) roundTrips(b *testing.B, body []byte) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := r.sendRequest(body); err != nil {
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

func BenchmarkRawAMQPRoundTrip(b *testing.B) { rawRoundTrip(b, false) }

// BenchmarkRawAMQPRoundTripDefaultExchange is the raw round trip without the topic exchange's
// routing, for comparison with the figures of earlier runs.
func BenchmarkRawAMQPRoundTripDefaultExchange(b *testing.B) { rawRoundTrip(b, true) }

func rawRoundTrip(b *testing.B, defaultExchange bool) {
	body, replyBody := rawCallBodies(b)
	var r *rawLoop
	r = newRawLoop(b, sharedBroker(b), true, defaultExchange, func(d amqp.Delivery, ch *amqp.Channel) {
		_ = r.publish(ch, r.replyQ, replyBody, true)
		_ = d.Ack(false)
	})
	r.roundTrips(b, body)
}

// BenchmarkRawAMQPRoundTripServerShaped is the raw round trip shaped like our server, to measure
// what its shape costs apart from its code: the consumer hands each delivery to a worker goroutine
// (ours must, to serialise per cluster and retry without blocking intake), and the worker publishes
// the confirmed reply on a second connection (ours publishes replies on the publisher's connection,
// which outlives consuming sessions) before it acknowledges the request on the first.
func BenchmarkRawAMQPRoundTripServerShaped(b *testing.B) {
	body, replyBody := rawCallBodies(b)
	replyCh, err := sharedBroker(b).Dial(b).Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := replyCh.Confirm(false); err != nil {
		b.Fatal(err)
	}
	work, done := make(chan amqp.Delivery, 16), make(chan struct{})
	b.Cleanup(func() { close(done) })
	r := newRawLoop(b, sharedBroker(b), true, false, func(d amqp.Delivery, _ *amqp.Channel) {
		select {
		case work <- d:
		case <-done:
		}
	})
	go func() {
		for {
			select {
			case d := <-work:
				_ = r.publish(replyCh, r.replyQ, replyBody, true)
				_ = d.Ack(false)
			case <-done:
				return
			}
		}
	}()
	r.roundTrips(b, body)
}

func BenchmarkRawAMQPThroughput(b *testing.B) { rawThroughput(b, false) }

// BenchmarkRawAMQPThroughputDefaultExchange is the raw cast loop without the topic exchange's
// routing, for comparison with the figures of earlier runs.
func BenchmarkRawAMQPThroughputDefaultExchange(b *testing.B) { rawThroughput(b, true) }

func rawThroughput(b *testing.B, defaultExchange bool) {
	m := &Message{Method: "cluster_delete", ArgsRaw: json.RawMessage(`{"uuid": "c-0"}`), UniqueID: newUUIDHex(), Context: testContext()}
	body, err := EncodeMessage(m)
	if err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	all := make(chan struct{})
	target := int64(b.N)
	r := newRawLoop(b, sharedBroker(b), false, defaultExchange, func(d amqp.Delivery, ch *amqp.Channel) {
		_ = d.Ack(false)
		if handled.Add(1) == target {
			close(all)
		}
	})
	b.ResetTimer()
	start := time.Now()
	// One channel, like our client's publisher; confirms are awaited outside the lock.
	publishParallel(b, b.N, func(int) error { return r.sendRequest(body) })
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d handled", handled.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkServerRoundTrip is the bridge's share of a call: the request arrives as magnum-api sends
// it — encoded once by the caller, here a raw amqp091 publisher that only splices a fresh msg_id and
// _unique_id into the same bytes — and the reply is taken off the reply queue undecoded, as the raw
// loop's is. Everything between (consume, the oslo decode, dispatch, dedup, the reply's encode,
// its confirmed publish, the ack) is the server's. Compare with BenchmarkRawAMQPRoundTrip;
// BenchmarkCallRoundTrip adds our own client's encode and decode, which magnum-api does in Python.
func BenchmarkServerRoundTrip(b *testing.B) {
	o := benchOptions(b)
	startServer(b, o, map[string]Handler{
		"get_ca_certificate": func(context.Context, *Request) (any, error) { return benchCert, nil },
	})
	br := sharedBroker(b)
	conn := br.Dial(b)
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	replyQ := "mcbbench-reply-" + rpctest.RandomSuffix()
	if _, err := ch.QueueDeclare(replyQ, false, true, false, false, nil); err != nil {
		b.Fatal(err)
	}
	replies, err := ch.Consume(replyQ, "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	// Placeholders of the length of the hex uuids they stand for, spliced per call.
	const msgIDMark, uniqueIDMark = "m0000000000000000000000000000000", "u0000000000000000000000000000000"
	m := benchCall(b)
	m.MsgID, m.UniqueID, m.ReplyQ = msgIDMark, uniqueIDMark, replyQ
	template, err := EncodeMessage(m)
	if err != nil {
		b.Fatal(err)
	}
	mi, ui := bytes.Index(template, []byte(msgIDMark)), bytes.Index(template, []byte(uniqueIDMark))
	if mi < 0 || ui < 0 {
		b.Fatal("placeholders not found in the encoded request")
	}
	call := func() error {
		body := slices.Clone(template)
		copy(body[mi:], newUUIDHex())
		copy(body[ui:], newUUIDHex())
		dc, err := pub.PublishWithDeferredConfirm(o.Exchange, o.Topic, false, false, amqp.Publishing{
			ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body})
		if err != nil {
			return err
		}
		if !dc.Wait() {
			return fmt.Errorf("nacked")
		}
		select {
		case d := <-replies:
			if !bytes.Contains(d.Body, body[mi:mi+len(msgIDMark)]) {
				return fmt.Errorf("reply to another call: %.200s", d.Body)
			}
		case <-time.After(10 * time.Second):
			return fmt.Errorf("no reply")
		}
		return nil
	}
	if err := call(); err != nil { // warm up
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkServerCastThroughput is the server's share of casts: they arrive as magnum-api sends
// them, encoded once by the caller — here raw amqp091 publishers, as in BenchmarkRawAMQPThroughput,
// that only splice a fresh _unique_id into the same bytes — and the server consumes, decodes,
// dispatches, dedups and acks them. BenchmarkCastThroughput adds our own client's encoding.
func BenchmarkServerCastThroughput(b *testing.B) {
	o := benchOptions(b)
	wait := castSink(b, o, b.N)
	const uniqueIDMark = "u0000000000000000000000000000000"
	template, err := EncodeMessage(&Message{Method: "cluster_delete", ArgsRaw: json.RawMessage(`{"uuid": "c-0"}`),
		UniqueID: uniqueIDMark, Context: testContext()})
	if err != nil {
		b.Fatal(err)
	}
	ui := bytes.Index(template, []byte(uniqueIDMark))
	if ui < 0 {
		b.Fatal("placeholder not found in the encoded cast")
	}
	conn := sharedBroker(b).Dial(b)
	pub, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	var pubMu sync.Mutex
	b.ResetTimer()
	start := time.Now()
	publishParallel(b, b.N, func(int) error {
		body := slices.Clone(template)
		copy(body[ui:], newUUIDHex())
		pubMu.Lock()
		dc, err := pub.PublishWithDeferredConfirm(o.Exchange, o.Topic, false, false, amqp.Publishing{
			ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body})
		pubMu.Unlock()
		if err != nil {
			return err
		}
		if !dc.Wait() {
			return fmt.Errorf("nacked")
		}
		return nil
	})
	wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkDecodeMessage is the codec's share of a call: the captured get_ca_certificate body
// (envelope, inner message, args and context).
func BenchmarkDecodeMessage(b *testing.B) {
	var body []byte
	for _, f := range loadFixtures(b, "request") {
		if f.release == "magnum-15.0.1" && f.name == "ca_show" {
			body = f.body
		}
	}
	if body == nil {
		b.Fatal("fixture ca_show not found")
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMessage(body); err != nil {
			b.Fatal(err)
		}
	}
}
