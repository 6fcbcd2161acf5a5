package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

func TestCastAndCall(t *testing.T) {
	o, logs := testOptions(t, sharedBroker(t))
	casts := make(chan *Request, 10)
	srv := startServer(t, o, map[string]Handler{
		"cluster_delete": func(ctx context.Context, r *Request) (any, error) {
			casts <- r
			return nil, nil
		},
		"get_ca_certificate": func(ctx context.Context, r *Request) (any, error) {
			var uuid string
			if _, err := r.Arg("uuid", &uuid); err != nil {
				return nil, err
			}
			return json.RawMessage(`{"pem": "CERT for ` + uuid + `", "user": "` + r.Context.UserID + `"}`), nil
		},
		"ping_conductor": func(ctx context.Context, r *Request) (any, error) { return true, nil },
	})
	c := newClient(t, o)
	ctx := context.Background()
	rctx := testContext()

	if err := c.Cast(ctx, "cluster_delete", map[string]any{"uuid": "c-1"}, rctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-casts:
		var uuid string
		if _, err := r.Arg("uuid", &uuid); err != nil || uuid != "c-1" {
			t.Fatalf("uuid arg %q (%v)", uuid, err)
		}
		if r.IsCall || r.MsgID != "" || !r.Deadline.IsZero() || r.Queue != o.Topic || len(r.UniqueID) != 32 {
			t.Fatalf("cast request fields: %+v", *r)
		}
		if r.Context.UserID != "u-1" || r.Context.AuthToken != testToken || !reflect.DeepEqual(r.Context.Roles, rctx.Roles) {
			t.Fatalf("context not carried: %v", r.Context)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cast not handled")
	}

	start := time.Now()
	res, err := c.Call(ctx, "get_ca_certificate", map[string]any{"uuid": "c-2"}, rctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(res) != `{"pem": "CERT for c-2", "user": "u-1"}` {
		t.Fatalf("result %s", res)
	}
	// The per-server queue works too (ListenerAPI targets it).
	res, err = c.ToServer(o.ServerID).Call(ctx, "ping_conductor", nil, rctx, 4*time.Second)
	if err != nil || string(res) != "true" {
		t.Fatalf("ping via %s.%s: %s %v", o.Topic, o.ServerID, res, err)
	}
	t.Logf("two calls in %s", time.Since(start))
	// The caller can see a reply before the server has counted its confirm.
	require.Eventually(t, func() bool { return srv.Stats().Replies == 2 }, 5*time.Second, 20*time.Millisecond, "second reply counted")
	if st := srv.Stats(); st.Handled != 3 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the auth token reached the logs")
	}
}

func TestFailureReplies(t *testing.T) {
	o, logs := testOptions(t, sharedBroker(t))
	var privateRan atomic.Bool
	startServer(t, o, map[string]Handler{
		"cluster_show": func(ctx context.Context, r *Request) (any, error) {
			return nil, NewMagnumError("ClusterNotFound", 404, "Cluster c-9 could not be found.", map[string]any{"cluster": "c-9"})
		},
		"sign_certificate": func(ctx context.Context, r *Request) (any, error) {
			return nil, fmt.Errorf("keystone said no to password %s", testPassword)
		},
		"wrapped": func(ctx context.Context, r *Request) (any, error) {
			return nil, fmt.Errorf("while rotating: %w", NewMagnumError("NotSupported", 400, "Rotating is not supported.", nil))
		},
		"bad_args": func(ctx context.Context, r *Request) (any, error) {
			var n int
			_, err := r.Arg("node_count", &n)
			return nil, err
		},
		"panics": func(ctx context.Context, r *Request) (any, error) { panic("boom") },
		"_private": func(ctx context.Context, r *Request) (any, error) {
			privateRan.Store(true)
			return "secret", nil
		},
		"ok": func(ctx context.Context, r *Request) (any, error) { return "fine", nil },
	})
	c := newClient(t, o)
	ctx := context.Background()
	call := func(method string, args any) *RemoteError {
		t.Helper()
		_, err := c.Call(ctx, method, args, testContext(), 10*time.Second)
		var re *RemoteError
		if !errors.As(err, &re) {
			t.Fatalf("%s: want a *RemoteError, got %v", method, err)
		}
		return re
	}

	re := call("cluster_show", nil)
	if re.Module != "magnum.common.exception" || re.Class != "ClusterNotFound" || re.Code != 404 || re.Kwargs["cluster"] != "c-9" ||
		re.Message != "Cluster c-9 could not be found." {
		t.Fatalf("ClusterNotFound: %+v", re)
	}
	re = call("sign_certificate", nil)
	if re.Class != "MagnumException" || re.Code != 500 || re.Message != "An unknown exception occurred." {
		t.Fatalf("plain error: %+v", re)
	}
	if strings.Contains(re.Error(), testPassword) {
		t.Fatal("plain error text reached the caller")
	}
	if re = call("wrapped", nil); re.Class != "NotSupported" || re.Code != 400 {
		t.Fatalf("wrapped RemoteError: %+v", re)
	}
	re = call("bad_args", map[string]any{"node_count": "three"})
	if re.Class != "InvalidParameterValue" || re.Code != 400 || re.Kwargs["err"] == nil || !strings.Contains(re.Message, "node_count") {
		t.Fatalf("InvalidArgs: %+v", re)
	}
	if re = call("panics", nil); re.Class != "MagnumException" || re.Code != 500 {
		t.Fatalf("panic: %+v", re)
	}
	re = call("no_such_thing", nil)
	if re.Module != "oslo_messaging.rpc.dispatcher" || re.Class != "NoSuchMethod" || re.Message != "Endpoint does not support RPC method no_such_thing" {
		t.Fatalf("unknown method: %+v", re)
	}
	if re = call("_private", nil); re.Class != "NoSuchMethod" || privateRan.Load() {
		t.Fatalf("private method must be refused like DefaultRPCAccessPolicy: %+v ran=%t", re, privateRan.Load())
	}
	_, err := c.CallMessage(ctx, &Message{Method: "ok", ArgsRaw: json.RawMessage(`{}`), Version: "2.0", Context: testContext()}, 10*time.Second)
	if !errors.As(err, &re) || re.Class != "UnsupportedVersion" {
		t.Fatalf("version 2.0: %v", err)
	}
	if res, err := c.Call(ctx, "ok", nil, nil, 10*time.Second); err != nil || string(res) != `"fine"` {
		t.Fatalf("server unusable after failures: %s %v", res, err)
	}
	if l := logs.String(); strings.Contains(l, testToken) {
		t.Fatal("token in logs")
	}
}

// TestRedeliveryToNewServerAfterCrash: the server's connection is cut by the broker while a
// handler runs; the unacknowledged message is redelivered, and after that server is gone a new
// server handles it.
func TestRedeliveryToNewServerAfterCrash(t *testing.T) {
	b := rpctestNewVhost(t)
	o, _ := testOptions(t, b)
	o.ShutdownTimeout = 300 * time.Millisecond
	started := make(chan *Request, 10)
	srvA := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			started <- r
			<-ctx.Done() // never finishes on server A
			return nil, ctx.Err()
		},
	})
	c := newClient(t, o)
	if err := c.Cast(context.Background(), "cluster_update", map[string]any{"uuid": "c-1", "node_count": 3}, testContext()); err != nil {
		t.Fatal(err)
	}
	first := waitRequest(t, started)
	if first.Redelivered {
		t.Fatal("first delivery flagged redelivered")
	}
	b.CloseConnections(t, "test: cut the server mid-handler")
	// Server A reconnects and receives the redelivery, which waits behind the stuck original.
	require.Eventually(t, func() bool {
		st := srvA.Stats()
		return st.Sessions >= 2 && st.Redelivered >= 1
	}, 15*time.Second, 20*time.Millisecond, "server A to reconnect and get the redelivery")
	if err := srvA.stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-started:
		t.Fatalf("server A ran the redelivered copy although the original was still running: %v", r)
	default:
	}

	handled := make(chan *Request, 10)
	o.ServerID += "-b"
	srvB := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			handled <- r
			return nil, nil
		},
	})
	r := waitRequest(t, handled)
	if !r.Redelivered || r.UniqueID != first.UniqueID {
		t.Fatalf("server B got %+v, want the redelivered %s", *r, first.UniqueID)
	}
	require.Eventually(t, func() bool { return queueDepth(t, b, o.Topic) == 0 }, 5*time.Second, 20*time.Millisecond, "ack on server B")
	if st := srvB.Stats(); st.Handled != 1 {
		t.Fatalf("server B stats %+v", st)
	}
}

// TestDuplicateSuppression: same _unique_id twice (a client retry, a redelivery of finished
// work) runs the handler once; a duplicate call still gets its reply.
func TestDuplicateSuppression(t *testing.T) {
	b := rpctestNewVhost(t)
	o, _ := testOptions(t, b)
	var runs sync.Map
	count := func(uid string) int {
		v, _ := runs.Load(uid)
		if v == nil {
			return 0
		}
		return int(v.(*atomic.Int32).Load())
	}
	release := make(chan struct{})
	started := make(chan string, 10)
	srv := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			v, _ := runs.LoadOrStore(r.UniqueID, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			if r.Args["slow"] != nil {
				started <- r.UniqueID
				<-release
			}
			return map[string]int{"runs": count(r.UniqueID)}, nil
		},
	})
	c := newClient(t, o)
	ctx := context.Background()
	msg := &Message{Method: "cluster_update", ArgsRaw: json.RawMessage(`{"uuid": "c-1"}`), UniqueID: newUUIDHex(), Context: testContext()}

	// 1. A cast published twice with the same _unique_id.
	for i := 0; i < 2; i++ {
		if err := c.CastMessage(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	require.Eventually(t, func() bool { return srv.Stats().Duplicates >= 1 }, 10*time.Second, 20*time.Millisecond, "duplicate cast recognised")
	if n := count(msg.UniqueID); n != 1 {
		t.Fatalf("cast ran %d times", n)
	}

	// 2. A call sent twice with the same _unique_id: the second is answered from memory.
	callMsg := &Message{Method: "cluster_update", ArgsRaw: json.RawMessage(`{"uuid": "c-2"}`), UniqueID: newUUIDHex(), Context: testContext()}
	r1, err := c.CallMessage(ctx, callMsg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.CallMessage(ctx, callMsg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(r1) != `{"runs": 1}` || string(r2) != string(r1) || count(callMsg.UniqueID) != 1 {
		t.Fatalf("duplicate call: %s / %s, ran %d times", r1, r2, count(callMsg.UniqueID))
	}

	// 3. The connection drops after the handler started; the broker redelivers; the original
	// finishes (its ack is lost with the connection) and the redelivered copy does no work.
	slow := &Message{Method: "cluster_update", ArgsRaw: json.RawMessage(`{"uuid": "c-3", "slow": true}`), UniqueID: newUUIDHex(), Context: testContext()}
	if err := c.CastMessage(ctx, slow); err != nil {
		t.Fatal(err)
	}
	<-started
	before := srv.Stats()
	b.CloseConnections(t, "test: drop before ack")
	require.Eventually(t, func() bool { return srv.Stats().Redelivered > before.Redelivered }, 15*time.Second, 20*time.Millisecond, "redelivery after reconnect")
	close(release)
	require.Eventually(t, func() bool {
		return srv.Stats().Duplicates > before.Duplicates && queueDepth(t, b, o.Topic) == 0
	}, 10*time.Second, 20*time.Millisecond, "redelivered copy recognised as duplicate")
	if n := count(slow.UniqueID); n != 1 {
		t.Fatalf("redelivered message ran %d times", n)
	}
}

// TestPerKeyOrdering: same key → arrival order, one at a time; different keys in parallel.
func TestPerKeyOrdering(t *testing.T) {
	o, _ := testOptions(t, sharedBroker(t))
	o.Workers = 8
	const keys, perKey = 6, 40
	var mu sync.Mutex
	seen := map[string][]int{}
	inFlight := map[string]bool{}
	var overlapSameKey atomic.Bool
	var concurrent, maxConcurrent atomic.Int32
	done := make(chan struct{}, keys*perKey)
	startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			key := DefaultKeyFunc(r)
			var seq int
			_, _ = r.Arg("seq", &seq)
			mu.Lock()
			if inFlight[key] {
				overlapSameKey.Store(true)
			}
			inFlight[key] = true
			mu.Unlock()
			n := concurrent.Add(1)
			for {
				m := maxConcurrent.Load()
				if n <= m || maxConcurrent.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			concurrent.Add(-1)
			mu.Lock()
			inFlight[key] = false
			seen[key] = append(seen[key], seq)
			mu.Unlock()
			done <- struct{}{}
			return nil, nil
		},
	})
	c := newClient(t, o)
	var wg sync.WaitGroup
	// One publisher per key keeps each key's order; keys interleave arbitrarily.
	for k := 0; k < keys; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perKey; i++ {
				cluster := fmt.Sprintf(`{"magnum_object.name": "Cluster", "magnum_object.data": {"uuid": "cluster-%d"}}`, k)
				args := json.RawMessage(fmt.Sprintf(`{"cluster": %s, "seq": %d}`, cluster, i))
				if err := c.Cast(context.Background(), "cluster_update", args, testContext()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := 0; i < keys*perKey; i++ {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d handled", i, keys*perKey)
		}
	}
	if overlapSameKey.Load() {
		t.Fatal("two messages with the same key ran at the same time")
	}
	for k, seqs := range seen {
		for i, s := range seqs {
			if s != i {
				t.Fatalf("key %s ran out of order: %v", k, seqs)
			}
		}
	}
	if maxConcurrent.Load() < 2 {
		t.Fatalf("different keys never ran in parallel (max concurrency %d)", maxConcurrent.Load())
	}
	t.Logf("max concurrency %d over %d keys", maxConcurrent.Load(), keys)
}

// TestQueueConfigurations: with quorum or durable settings the server and client declare
// exactly what oslo.messaging declares (the literal tables below are those of oslo.messaging's
// impl_rabbit._get_queue_arguments), so the broker accepts Python's declarations unchanged.
func TestQueueConfigurations(t *testing.T) {
	cases := []struct {
		name      string
		set       func(*Options)
		durable   bool
		topicArgs func(o Options) amqp.Table
	}{
		{"defaults", func(o *Options) {}, false, func(Options) amqp.Table { return nil }},
		{"durable", func(o *Options) { o.DurableQueues = true }, true, func(Options) amqp.Table { return nil }},
		{"quorum", func(o *Options) {
			o.QuorumQueues = true
			o.QuorumDeliveryLimit = 3
			o.QuorumMaxMemoryLength = 100
		}, true, func(Options) amqp.Table {
			return amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(3), "x-max-in-memory-length": int32(100)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := sharedBroker(t)
			o, _ := testOptions(t, b)
			tc.set(&o)
			startServer(t, o, map[string]Handler{
				"echo": func(ctx context.Context, r *Request) (any, error) { return r.Args["v"], nil },
			})
			c := newClient(t, o)
			if res, err := c.Call(context.Background(), "echo", map[string]any{"v": tc.name}, testContext(), 10*time.Second); err != nil || string(res) != `"`+tc.name+`"` {
				t.Fatalf("round trip: %s %v", res, err)
			}
			conn := b.Dial(t)
			declare := func(what string, f func(ch *amqp.Channel) error) error {
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				defer ch.Close()
				return f(ch)
			}
			// Python's declarations, literally.
			pyTopic := func(ch *amqp.Channel) error {
				if err := ch.ExchangeDeclare(o.Exchange, "topic", tc.durable, false, false, false, nil); err != nil {
					return err
				}
				for _, q := range []string{o.Topic, o.Topic + "." + o.ServerID} {
					if _, err := ch.QueueDeclare(q, tc.durable, false, false, false, tc.topicArgs(o)); err != nil {
						return err
					}
				}
				return nil
			}
			if err := declare("python topic", pyTopic); err != nil {
				t.Fatalf("Python's declaration refused (406 would hit magnum-api): %v", err)
			}
			pyReply := func(ch *amqp.Channel) error {
				_, err := ch.QueueDeclare(c.ReplyQueue(), false, false, false, false, amqp.Table{"x-expires": int32(120000)})
				return err
			}
			if err := declare("python reply", pyReply); err != nil {
				t.Fatalf("reply queue differs from Python's: %v", err)
			}
			pyFanout := func(ch *amqp.Channel) error {
				return ch.ExchangeDeclare(o.Topic+"_fanout", "fanout", false, true, false, false, nil)
			}
			if err := declare("python fanout", pyFanout); err != nil {
				t.Fatalf("fanout exchange differs from Python's: %v", err)
			}
			// The check has teeth: the opposite durability is refused.
			err := declare("mismatch", func(ch *amqp.Channel) error {
				_, err := ch.QueueDeclare(o.Topic, !tc.durable, false, false, false, tc.topicArgs(o))
				return err
			})
			var aerr *amqp.Error
			if !errors.As(err, &aerr) || aerr.Code != amqp.PreconditionFailed {
				t.Fatalf("a mismatching declaration should get 406, got %v", err)
			}
		})
	}
}

// TestDeclarationMismatchIsFatal: a server whose options disagree with existing queues stops
// with an explanation instead of looping.
func TestDeclarationMismatchIsFatal(t *testing.T) {
	b := sharedBroker(t)
	o, _ := testOptions(t, b)
	conn := b.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(o.Exchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(o) // durable=false: mismatch
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = s.Run(ctx)
	if err == nil || !errors.Is(err, errDeclarationMismatch) || !strings.Contains(err.Error(), "amqp_durable_queues") {
		t.Fatalf("want a declaration mismatch error naming the options, got %v", err)
	}
	_ = ch.ExchangeDelete(o.Exchange, false, false)
}

// TestMalformedMessages: bad bodies never reach handlers or block the consumer; calls get a
// failure reply, casts are parked with a reason and acknowledged.
func TestMalformedMessages(t *testing.T) {
	b := sharedBroker(t)
	o, logs := testOptions(t, b)
	srv := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			var n int
			if _, err := r.Arg("node_count", &n); err != nil {
				return nil, err
			}
			return n, nil
		},
	})
	c := newClient(t, o)
	if _, err := c.Call(context.Background(), "cluster_update", map[string]any{"node_count": 1}, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	conn := b.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	inner := func(s string) string {
		q, _ := json.Marshal(s)
		return `{"oslo.version": "2.0", "oslo.message": ` + string(q) + `}`
	}
	tokenCtx := `"_context_auth_token": "` + testToken + `"`
	bad := map[string]string{ // body -> expected reason fragment
		`not json at all ` + testToken: "not valid JSON",
		`[1, 2]`:                       "not a JSON object",
		`{"oslo.version": "3.0", "oslo.message": "{}"}`:            "unsupported envelope version",
		`{"oslo.version": "2.0", "oslo.message": {"method": "x"}}`: "oslo.message is not a JSON string",
		inner(`[1]`):                            "not a JSON object",
		inner(`{"args": {}, ` + tokenCtx + `}`): "no method",
		inner(`{"method": "cluster_update", "args": [1], ` + tokenCtx + `}`): "args is not a JSON object",
		inner(`{"method": 7, "args": {}}`):                                   "method is not a string",
		inner(`{"method": "cluster_update", "args": {"node_count": "x"}, "_unique_id": "` + newUUIDHex() + `", ` + tokenCtx + `}`): "invalid arguments",
		inner(`{"method": "no_such", "args": {}, "_unique_id": "` + newUUIDHex() + `"}`):                                           "NoSuchMethod",
	}
	for body := range bad {
		if err := ch.Publish(o.Exchange, o.Topic, false, false, amqp.Publishing{Body: []byte(body), ContentType: "application/json",
			Headers: amqp.Table{"origin": "test"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A malformed call (args not an object) gets a failure reply on its reply queue.
	_, err = c.CallMessage(context.Background(), &Message{Method: "cluster_update", ArgsRaw: json.RawMessage(`{"node_count": "x"}`)}, 10*time.Second)
	var re *RemoteError
	if !errors.As(err, &re) || re.Class != "InvalidParameterValue" {
		t.Fatalf("call with invalid args: %v", err)
	}
	require.Eventually(t, func() bool { return srv.Stats().Parked == int64(len(bad)) }, 15*time.Second, 20*time.Millisecond, "all bad casts parked")
	parked := map[string]string{}
	for i := 0; i < len(bad); i++ {
		d, ok, err := ch.Get(srv.ParkingQueue(), true)
		if err != nil || !ok {
			t.Fatalf("parking queue has %d messages, want %d (%v)", i, len(bad), err)
		}
		reason, _ := d.Headers[ParkReasonHeader].(string)
		if d.Headers["origin"] != "test" || d.Headers[parkedFromHeader] != o.Topic || d.DeliveryMode != 2 {
			t.Errorf("parked message lost its headers/persistence: %v", d.Headers)
		}
		parked[string(d.Body)] = reason
	}
	for body, want := range bad {
		if got, ok := parked[body]; !ok || !strings.Contains(got, want) {
			t.Errorf("body %.60q: parked reason %q, want it to mention %q", body, got, want)
		}
		if strings.Contains(parked[body], testToken) {
			t.Errorf("reason leaks the token: %s", parked[body])
		}
	}
	if depth := queueDepth(t, b, o.Topic); depth != 0 {
		t.Fatalf("%d messages left in the topic queue: bad input must be acknowledged", depth)
	}
	if res, err := c.Call(context.Background(), "cluster_update", map[string]any{"node_count": 4}, nil, 10*time.Second); err != nil || string(res) != "4" {
		t.Fatalf("server unusable after bad input: %s %v", res, err)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("token in logs")
	}
}

// TestMalformedCallGetsFailureReply publishes a call whose args are not an object.
func TestMalformedCallGetsFailureReply(t *testing.T) {
	b := sharedBroker(t)
	o, _ := testOptions(t, b)
	startServer(t, o, map[string]Handler{})
	conn := b.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	replyQ := "reply_" + newUUIDHex()
	if _, err := ch.QueueDeclare(replyQ, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	replies, err := ch.Consume(replyQ, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgInner, _ := json.Marshal(`{"method": "cluster_update", "args": [], "_msg_id": "m-1", "_reply_q": "` + replyQ + `", "_timeout": null}`)
	body := `{"oslo.version": "2.0", "oslo.message": ` + string(msgInner) + `}`
	if err := ch.Publish(o.Exchange, o.Topic, false, false, amqp.Publishing{Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-replies:
		r, err := DecodeReply(d.Body)
		if err != nil {
			t.Fatal(err)
		}
		if r.MsgID != "m-1" || !r.Ending || r.Failure == nil || r.Failure.Class != "MagnumException" ||
			!strings.Contains(r.Failure.Message, "args is not a JSON object") {
			t.Fatalf("reply %+v / %+v", r, r.Failure)
		}
		if d.ContentType != "application/json" || d.ContentEncoding != "utf-8" || d.DeliveryMode != 2 || d.Expiration != "" {
			t.Fatalf("reply properties %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no failure reply")
	}
}

// TestExpiredCallNotExecuted: a call that waited (behind a slow cast for the same cluster)
// past its deadline is answered with MessagingTimeout and not run.
func TestExpiredCallNotExecuted(t *testing.T) {
	o, _ := testOptions(t, sharedBroker(t))
	var callRan atomic.Bool
	castStarted := make(chan struct{}, 1)
	srv := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			castStarted <- struct{}{}
			time.Sleep(1500 * time.Millisecond)
			return nil, nil
		},
		"cluster_upgrade": func(ctx context.Context, r *Request) (any, error) {
			callRan.Store(true)
			return nil, nil
		},
	})
	c := newClient(t, o)
	ctx := context.Background()
	if err := c.Cast(ctx, "cluster_update", map[string]any{"uuid": "c-1"}, nil); err != nil {
		t.Fatal(err)
	}
	<-castStarted
	_, err := c.Call(ctx, "cluster_upgrade", map[string]any{"uuid": "c-1"}, nil, 500*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("want a timeout, got %v", err)
	}
	require.Eventually(t, func() bool { st := srv.Stats(); return st.Expired == 1 && st.Replies == 1 }, 10*time.Second, 20*time.Millisecond, "expired call answered")
	if callRan.Load() {
		t.Fatal("an expired call was executed")
	}
	if st := srv.Stats(); st.Replies != 1 {
		t.Fatalf("the expired call must still be answered: %+v", st)
	}
}

// TestRetryableErrors: Retry-marked failures run again with backoff, the message stays unacked
// meanwhile; exhausted retries park a cast.
func TestRetryableErrors(t *testing.T) {
	b := sharedBroker(t)
	o, _ := testOptions(t, b)
	o.RetryAttempts = 4
	var attempts sync.Map
	srv := startServer(t, o, map[string]Handler{
		"flaky": func(ctx context.Context, r *Request) (any, error) {
			attempts.Store(r.UniqueID, r.Attempt)
			if r.Attempt < 3 {
				return nil, Retry(errors.New("database is down"))
			}
			return r.Attempt, nil
		},
		"broken": func(ctx context.Context, r *Request) (any, error) {
			return nil, Retry(errors.New("database is still down"))
		},
	})
	c := newClient(t, o)
	res, err := c.Call(context.Background(), "flaky", map[string]any{"uuid": "c-1"}, nil, 10*time.Second)
	if err != nil || string(res) != "3" {
		t.Fatalf("flaky call: %s %v", res, err)
	}
	if err := c.Cast(context.Background(), "broken", map[string]any{"uuid": "c-2"}, nil); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool { return srv.Stats().Parked == 1 }, 10*time.Second, 20*time.Millisecond, "exhausted cast parked")
	if st := srv.Stats(); st.Retried != 2+3 {
		t.Fatalf("retries %+v", st)
	}
	require.Eventually(t, func() bool { return queueDepth(t, b, o.Topic) == 0 }, 5*time.Second, 20*time.Millisecond, "queue drained")
}

// TestGracefulShutdownRequeues: cancelling Run lets the running handler finish and requeues
// the messages that had not started.
func TestGracefulShutdownRequeues(t *testing.T) {
	b := sharedBroker(t)
	o, _ := testOptions(t, b)
	o.Workers = 1
	o.PrefetchCount = 0
	started := make(chan string, 10)
	var finished atomic.Int32
	srv := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			started <- r.UniqueID
			time.Sleep(500 * time.Millisecond)
			finished.Add(1)
			return nil, nil
		},
	})
	c := newClient(t, o)
	for i := 0; i < 5; i++ {
		if err := c.Cast(context.Background(), "cluster_update", map[string]any{"uuid": fmt.Sprintf("c-%d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	time.Sleep(100 * time.Millisecond) // let the rest arrive in the server's buffer
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	if finished.Load() != 1 {
		t.Fatalf("the running handler should have finished (finished=%d)", finished.Load())
	}
	require.Eventually(t, func() bool { return queueDepth(t, b, o.Topic) == 4 }, 5*time.Second, 20*time.Millisecond, "4 messages back in the queue")
}

// TestReplyQueueAppearsLate: a reply to a missing queue is retried (mandatory + returns) and
// delivered once the queue exists; one that never appears is dropped after the bound.
func TestReplyQueueAppearsLate(t *testing.T) {
	b := sharedBroker(t)
	o, _ := testOptions(t, b)
	o.MissingReplyQueueTimeout = 3 * time.Second
	srv := startServer(t, o, map[string]Handler{"ping_conductor": func(context.Context, *Request) (any, error) { return true, nil }})
	conn := b.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	publishCall := func(replyQ string) {
		inner, _ := json.Marshal(`{"method": "ping_conductor", "args": {}, "_msg_id": "m-` + replyQ + `", "_reply_q": "` + replyQ + `", "_timeout": null, "_unique_id": "` + newUUIDHex() + `"}`)
		if err := ch.Publish(o.Exchange, o.Topic, false, false, amqp.Publishing{Body: []byte(`{"oslo.version": "2.0", "oslo.message": ` + string(inner) + `}`), Expiration: "60000"}); err != nil {
			t.Fatal(err)
		}
	}
	late := "reply_" + newUUIDHex()
	publishCall(late)
	time.Sleep(700 * time.Millisecond)
	if _, err := ch.QueueDeclare(late, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool { return queueDepth(t, b, late) == 1 }, 5*time.Second, 20*time.Millisecond, "late reply delivered")

	never := "reply_" + newUUIDHex()
	publishCall(never)
	require.Eventually(t, func() bool { return srv.Stats().RepliesDropped == 1 }, 10*time.Second, 20*time.Millisecond, "reply to a missing queue dropped")
	require.Eventually(t, func() bool { return queueDepth(t, b, o.Topic) == 0 }, 5*time.Second, 20*time.Millisecond, "both calls acknowledged")
}

// TestNoGoroutineLeakOnReconnect forces several broker-side disconnects and checks that
// goroutines neither pile up across reconnects nor survive the server and client.
func TestNoGoroutineLeakOnReconnect(t *testing.T) {
	b := rpctestNewVhost(t)
	o, _ := testOptions(t, b)
	before := settledGoroutines()
	srv := startServer(t, o, map[string]Handler{"ping_conductor": func(context.Context, *Request) (any, error) { return true, nil }})
	c := newClient(t, o)
	call := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		for ctx.Err() == nil { // the client may need a retry while its reply consumer reconnects
			if _, err = c.Call(ctx, "ping_conductor", nil, nil, 3*time.Second); err == nil {
				return
			}
		}
		t.Fatalf("call after reconnect: %v", err)
	}
	call()
	baseline := settledGoroutines()
	for i := 1; i <= 4; i++ {
		sessions := srv.Stats().Sessions
		b.CloseConnections(t, fmt.Sprintf("test: forced disconnect %d", i))
		require.Eventually(t, func() bool { return srv.Stats().Sessions > sessions }, 20*time.Second, 20*time.Millisecond, "server reconnect")
		call()
	}
	after := settledGoroutines()
	if after > baseline+2 {
		t.Fatalf("goroutines grew across 4 reconnects: %d -> %d\n%s", baseline, after, goroutineDump())
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	final := settledGoroutines()
	if final > before+1 {
		t.Fatalf("goroutines left after stop: %d before start, %d after\n%s", before, final, goroutineDump())
	}
	t.Logf("goroutines: %d before, %d running, %d after 4 reconnects, %d after stop", before, baseline, after, final)
}

func waitRequest(t *testing.T, ch <-chan *Request) *Request {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("handler not reached")
		return nil
	}
}

// queueDepth reads the ready-message count of a queue (passive declare).
func queueDepth(t testing.TB, b interface {
	Dial(testing.TB) *amqp.Connection
}, name string) int {
	t.Helper()
	conn := b.Dial(t)
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err != nil {
		return -1
	}
	return q.Messages
}

// TestFailoverAcrossHosts: with a dead broker first in transport_url, server and client still
// connect (to the next host) after backing off.
func TestFailoverAcrossHosts(t *testing.T) {
	b := sharedBroker(t)
	o, _ := testOptions(t, b)
	dead := Host{Hostname: "127.0.0.1", Port: testutil.FreePort(t), Username: b.User, Password: b.Password}
	o.Hosts = []Host{dead, o.Hosts[0], dead}
	startServer(t, o, map[string]Handler{"ping_conductor": func(context.Context, *Request) (any, error) { return true, nil }})
	for i := 0; i < 3; i++ { // each new client may start on any host
		c := newClient(t, o)
		if res, err := c.Call(context.Background(), "ping_conductor", nil, nil, 20*time.Second); err != nil || string(res) != "true" {
			t.Fatalf("call through failover: %s %v", res, err)
		}
	}
}
