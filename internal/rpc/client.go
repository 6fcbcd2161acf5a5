package rpc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrTimeout is returned (wrapped in a *TimeoutError) when a call gets no reply in time, like
// oslo_messaging.MessagingTimeout.
var ErrTimeout = errors.New("rpc: timed out waiting for a reply")

// TimeoutError names the call that timed out.
type TimeoutError struct {
	Method string
	MsgID  string
	After  time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("rpc: no reply to %s (msg_id %s) within %s", e.Method, e.MsgID, e.After)
}

// Unwrap makes errors.Is(err, ErrTimeout) true.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// Client sends casts and calls the way magnum-api does (oslo.messaging's RPCClient): the same
// exchange and routing key, envelope, key order, JSON formatting and AMQP properties, and for
// calls a reply queue reply_<uuid4 hex> declared like Python's. Publishing waits for publisher
// confirms and retries across reconnects, so a message is sent at least once (the server
// suppresses duplicates by _unique_id). Used by tests, benchmarks and tools.
type Client struct {
	shared *clientShared
	// server, when set, targets <topic>.<server> instead of the shared topic queue.
	server string
}

type clientShared struct {
	opts Options
	log  *slog.Logger
	pub  *publisher

	replyQ     string
	replyOnce  sync.Once
	replyReady chan struct{}
	replyErr   error

	mu      sync.Mutex
	waiters map[string]chan *Reply

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewClient returns a client; it connects on first use.
func NewClient(opts Options) (*Client, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sh := &clientShared{
		opts:       opts,
		log:        opts.logger(),
		replyQ:     "reply_" + newUUIDHex(),
		replyReady: make(chan struct{}),
		waiters:    map[string]chan *Reply{},
		ctx:        ctx,
		cancel:     cancel,
	}
	sh.pub = newPublisher(&sh.opts, "client")
	return &Client{shared: sh}, nil
}

// ToServer returns a client (sharing connections) that targets the per-server queue.
func (c *Client) ToServer(serverID string) *Client {
	return &Client{shared: c.shared, server: serverID}
}

// ReplyQueue is this client's reply queue name.
func (c *Client) ReplyQueue() string { return c.shared.replyQ }

// Close stops the reply consumer and closes the connections.
func (c *Client) Close() error {
	c.shared.cancel()
	c.shared.pub.close()
	c.shared.wg.Wait()
	return nil
}

func (c *Client) routingKey() string {
	if c.server != "" {
		return c.shared.opts.Topic + "." + c.server
	}
	return c.shared.opts.Topic
}

// Cast sends a fire-and-forget request. args must marshal to a JSON object (a json.RawMessage
// keeps its key order on the wire; nil means {}).
func (c *Client) Cast(ctx context.Context, method string, args any, rctx *Context) error {
	m, err := newMessage(method, args, rctx)
	if err != nil {
		return err
	}
	return c.CastMessage(ctx, m)
}

// Call sends a request and waits up to timeout (0 = rpc_response_timeout) for its reply. A
// failure reply is returned as *RemoteError; no reply in time as *TimeoutError.
func (c *Client) Call(ctx context.Context, method string, args any, rctx *Context, timeout time.Duration) (json.RawMessage, error) {
	m, err := newMessage(method, args, rctx)
	if err != nil {
		return nil, err
	}
	return c.CallMessage(ctx, m, timeout)
}

func newMessage(method string, args any, rctx *Context) (*Message, error) {
	var raw json.RawMessage
	switch a := args.(type) {
	case nil:
		raw = json.RawMessage("{}")
	case json.RawMessage:
		raw = a
	default:
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("rpc: marshal args: %w", err)
		}
		raw = b
	}
	if _, err := splitObject(raw); notAnObject(raw, err) {
		return nil, errors.New("rpc: args must be a JSON object")
	} else if err != nil {
		return nil, errors.New("rpc: args are not valid JSON")
	}
	if rctx == nil {
		rctx = &Context{}
	}
	return &Message{Method: method, ArgsRaw: raw, Context: rctx}, nil
}

// requestProps are the properties kombu sets on a request, so that the broker and the
// Python services treat ours the same.
func requestProps(body []byte, expiration time.Duration) amqp.Publishing {
	p := amqp.Publishing{ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body}
	if expiration > 0 {
		p.Expiration = strconv.FormatInt(int64(expiration/time.Millisecond), 10)
	}
	return p
}

// CastMessage sends a prepared message as a cast (UniqueID is generated when empty; MsgID and
// ReplyQ are cleared).
func (c *Client) CastMessage(ctx context.Context, m *Message) error {
	mm := *m
	mm.MsgID, mm.ReplyQ, mm.Timeout = "", "", nil
	if mm.UniqueID == "" {
		mm.UniqueID = newUUIDHex()
	}
	body, err := EncodeMessage(&mm)
	if err != nil {
		return err
	}
	ex := c.shared.opts.topicExchange()
	return c.shared.pub.publish(ctx, &ex, ex.Name, c.routingKey(), false, requestProps(body, 0))
}

// CallMessage sends a prepared message as a call with a fresh _msg_id and this client's reply
// queue, and waits for the reply.
func (c *Client) CallMessage(ctx context.Context, m *Message, timeout time.Duration) (json.RawMessage, error) {
	sh := c.shared
	if timeout <= 0 {
		timeout = sh.opts.ResponseTimeout
	}
	if err := sh.startReplies(ctx); err != nil {
		return nil, err
	}
	mm := *m
	mm.MsgID = newUUIDHex()
	mm.ReplyQ = sh.replyQ
	if mm.UniqueID == "" {
		mm.UniqueID = newUUIDHex()
	}
	body, err := EncodeMessage(&mm)
	if err != nil {
		return nil, err
	}
	replies := make(chan *Reply, 16)
	sh.mu.Lock()
	sh.waiters[mm.MsgID] = replies
	sh.mu.Unlock()
	defer func() {
		sh.mu.Lock()
		delete(sh.waiters, mm.MsgID)
		sh.mu.Unlock()
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	pubCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ex := sh.opts.topicExchange()
	if err := sh.pub.publish(pubCtx, &ex, ex.Name, c.routingKey(), false, requestProps(body, timeout)); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, &TimeoutError{Method: m.Method, MsgID: mm.MsgID, After: timeout}
		}
		return nil, err
	}
	var result json.RawMessage
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, &TimeoutError{Method: m.Method, MsgID: mm.MsgID, After: timeout}
		case r := <-replies:
			if r.Failure != nil {
				return nil, r.Failure
			}
			if r.HasResult && !isNull(r.Result) {
				result = r.Result // old servers sent the result before a separate ending message
			}
			if !r.Ending {
				continue // call-monitor heartbeat or a data message
			}
			if result == nil {
				result = json.RawMessage("null")
			}
			return result, nil
		}
	}
}

// startReplies declares the reply queue and starts consuming it (once); it returns when the
// consumer is ready, so that no reply can arrive before anyone listens.
func (sh *clientShared) startReplies(ctx context.Context) error {
	sh.replyOnce.Do(func() {
		sh.wg.Add(1)
		go sh.consumeReplies()
	})
	select {
	case <-sh.replyReady:
		return sh.replyErr
	case <-ctx.Done():
		return ctx.Err()
	case <-sh.ctx.Done():
		return errors.New("rpc: client closed")
	}
}

// consumeReplies keeps the reply consumer alive across reconnects until the client closes.
func (sh *clientShared) consumeReplies() {
	defer sh.wg.Done()
	conn := newConnector(&sh.opts, "reply-consumer")
	readyOnce := sync.Once{}
	markReady := func(err error) {
		readyOnce.Do(func() {
			sh.replyErr = err
			close(sh.replyReady)
		})
	}
	defer markReady(errors.New("rpc: client closed"))
	retry := newBackoff(sh.opts.ReconnectInterval, sh.opts.ReconnectMax)
	for sh.ctx.Err() == nil {
		err := sh.replySession(conn, func() {
			retry = newBackoff(sh.opts.ReconnectInterval, sh.opts.ReconnectMax) // connected: start over
			markReady(nil)
		})
		if sh.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errDeclarationMismatch) {
			markReady(err)
			sh.log.Error("rpc: cannot declare the reply queue", "error", err.Error())
		} else if err != nil {
			sh.log.Warn("rpc: reply consumer interrupted, reconnecting", "error", err.Error())
		}
		if !backoff.Sleep(sh.ctx, retry.Step()) {
			return
		}
	}
}

func (sh *clientShared) replySession(c *connector, ready func()) error {
	conn, err := c.connect(sh.ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := declareQueue(ch, sh.opts.replyQueue(sh.replyQ)); err != nil {
		return err
	}
	deliveries, err := ch.Consume(sh.replyQ, "", true, false, false, false, nil)
	if err != nil {
		return err
	}
	ready()
	for {
		select {
		case <-sh.ctx.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("reply consumer closed")
			}
			r, err := DecodeReply(d.Body)
			if err != nil {
				sh.log.Warn("rpc: undecodable reply dropped", "error", err.Error())
				continue
			}
			sh.mu.Lock()
			w := sh.waiters[r.MsgID]
			sh.mu.Unlock()
			if w == nil {
				sh.log.Debug("rpc: reply for a call nobody waits for", "msg_id", r.MsgID)
				continue
			}
			select {
			case w <- r:
			default:
			}
		}
	}
}

func fillRandom(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic("rpc: crypto/rand failed: " + err.Error())
	}
}
