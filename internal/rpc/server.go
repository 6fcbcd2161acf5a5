package rpc

import (
	"container/list"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/logctx"
)

// ParkReasonHeader is set on every message published to the parking queue.
const ParkReasonHeader = "x-mcb-park-reason"

// parkedFromHeader names the queue a parked message was consumed from.
const parkedFromHeader = "x-mcb-parked-from"

// Server consumes magnum-conductor's queues and dispatches to registered handlers.
//
// Queues (declared exactly as oslo.messaging declares them with the same options, spec §2.2):
// the topic queue <topic> (shared by competing consumers), the per-server queue
// <topic>.<ServerID> (a stable id, so restarts do not orphan queues), a fanout queue on the
// <topic>_fanout exchange, and this project's durable parking queue.
//
// Delivery (stronger than Python, which acknowledges before dispatch):
//   - a message is acknowledged only after its handler returned (and, for a call, after the
//     reply was confirmed by the broker), so a crash or connection loss means redelivery;
//   - a duplicate (same _unique_id as a message finished recently) does no work; a duplicate
//     call is answered again with the remembered reply;
//   - messages with the same key (Options.KeyFunc, by default the cluster uuid) run one at a
//     time in arrival order, different keys in parallel on Options.Workers workers;
//   - a handler error marked with Retry is retried with backoff while the message stays
//     unacknowledged; any other error is final: a call gets the failure, the message is acked;
//   - undecodable messages never reach handlers: a call gets a failure reply, a cast is parked.
//
// Expired calls: a call whose deadline (its AMQP expiration) passed before a worker picked it
// up is NOT executed. magnum-api has already reported a timeout to its user, so doing the work
// now (rotating a CA, starting an upgrade) would contradict what the user was told. The call is
// answered with oslo_messaging.exceptions.MessagingTimeout (the caller normally ignores a late
// reply) and acknowledged.
type Server struct {
	opts     Options
	log      *slog.Logger
	keyFunc  func(*Request) string
	handlers map[string]Handler

	fanoutID string
	pub      *publisher
	sched    *scheduler
	dedup    *dedupCache
	obsolete *obsoleteReplies
	stats    serverStats

	readyOnce sync.Once
	ready     chan struct{}
	running   atomic.Bool

	// handlerCtx is what handlers run under; it is cancelled only when the shutdown timeout
	// expires, not when Run's context is cancelled.
	handlerCtx    context.Context
	cancelHandler context.CancelFunc

	sessMu sync.Mutex
	sess   *session
}

// NewServer validates opts and returns a server; register handlers, then call Run.
func NewServer(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.DedupSize <= 0 {
		opts.DedupSize = 1
	}
	if opts.ServerID == "" {
		return nil, errors.New("rpc: ServerID is required for the per-server queue")
	}
	s := &Server{
		opts:     opts,
		log:      opts.logger(),
		keyFunc:  opts.KeyFunc,
		handlers: map[string]Handler{},
		fanoutID: newUUIDHex(),
		dedup:    newDedupCache(opts.DedupSize),
		obsolete: newObsoleteReplies(),
		ready:    make(chan struct{}),
	}
	if s.keyFunc == nil {
		s.keyFunc = DefaultKeyFunc
	}
	s.pub = newPublisher(&s.opts, "reply")
	return s, nil
}

// Register installs the handler for method; call it before Run.
func (s *Server) Register(method string, h Handler) {
	if s.running.Load() {
		panic("rpc: Register after Run")
	}
	s.handlers[method] = h
}

// Ready is closed once the server consumes from its queues for the first time.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Queues lists the queue names the server consumes from.
func (s *Server) Queues() []string {
	q := []string{s.opts.Topic, s.serverQueue()}
	if s.opts.Fanout {
		q = append(q, s.opts.fanoutQueue(s.fanoutID).Name)
	}
	return q
}

func (s *Server) serverQueue() string { return s.opts.Topic + "." + s.opts.ServerID }

// ParkingQueue is the name of the queue malformed casts go to.
func (s *Server) ParkingQueue() string { return s.opts.parkingQueue().Name }

// Run consumes until ctx is cancelled, then shuts down gracefully: it stops consuming, lets
// running handlers finish for up to ShutdownTimeout, and requeues what had not started. It
// reconnects (with backoff across the configured hosts) whenever the connection is lost. It
// returns nil after a graceful shutdown, or an error that reconnecting cannot fix (a 406 on a
// declaration: the options do not match the existing queues).
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("rpc: Run called twice")
	}
	s.handlerCtx, s.cancelHandler = context.WithCancel(context.WithoutCancel(ctx))
	defer s.cancelHandler()
	s.sched = newScheduler()
	s.log.Info("rpc: server starting", "options", s.opts, "queues", s.Queues(), "workers", s.opts.Workers)

	var workers sync.WaitGroup
	for i := 0; i < s.opts.Workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			s.work()
		}()
	}

	var runErr error
	for attempt := 0; ctx.Err() == nil; {
		sess, err := s.startSession(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, errDeclarationMismatch) || isConfigError(err) {
				runErr = err
				break
			}
			s.brokerError()
			delay := backoff(attempt, s.opts.ReconnectInterval, s.opts.ReconnectMax)
			attempt++
			s.log.Warn("rpc: cannot set up consumers, retrying", "error", err.Error(), "retry_in", delay.Round(time.Millisecond))
			if !sleepCtx(ctx, delay) {
				break
			}
			continue
		}
		attempt = 0
		s.readyOnce.Do(func() { close(s.ready) })
		select {
		case <-ctx.Done():
		case reason := <-sess.lost:
			s.brokerError()
			s.log.Warn("rpc: lost the broker connection, reconnecting", "reason", reason)
			s.endSession(sess)
		}
	}

	s.shutdown(&workers)
	s.log.Info("rpc: server stopped", "stats", s.Stats())
	return runErr
}

func (s *Server) brokerError() {
	if s.opts.OnBrokerError != nil {
		s.opts.OnBrokerError()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ---- sessions -----------------------------------------------------------------------------------

// session is one consuming connection and the deliveries it produced. Delivery tags are only
// valid on it: once it is dead, unacknowledged messages are redelivered by the broker.
type session struct {
	conn      *amqp.Connection
	ch        *amqp.Channel
	tags      []string
	lost      chan string
	dead      chan struct{}
	deadOnce  sync.Once
	consumers sync.WaitGroup
	watcher   sync.WaitGroup
}

func (ss *session) isDead() bool {
	select {
	case <-ss.dead:
		return true
	default:
		return false
	}
}

func (ss *session) kill() {
	ss.deadOnce.Do(func() {
		close(ss.dead)
		_ = ss.conn.Close()
	})
}

// startSession connects, declares everything and starts the consumers.
func (s *Server) startSession(ctx context.Context) (*session, error) {
	conn, err := newConnector(&s.opts, "consume").connect(ctx)
	if err != nil {
		return nil, err
	}
	ss := &session{conn: conn, lost: make(chan string, 1), dead: make(chan struct{})}
	fail := func(err error) (*session, error) {
		ss.kill()
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	ss.ch = ch
	if s.opts.PrefetchCount > 0 {
		if err := ch.Qos(s.opts.PrefetchCount, 0, false); err != nil {
			return fail(err)
		}
	}
	if err := declareExchange(ch, s.opts.topicExchange()); err != nil {
		return fail(err)
	}
	consume := []queueDecl{s.opts.topicQueue(s.opts.Topic), s.opts.topicQueue(s.serverQueue())}
	if s.opts.Fanout {
		if err := declareExchange(ch, s.opts.fanoutExchange()); err != nil {
			return fail(err)
		}
		consume = append(consume, s.opts.fanoutQueue(s.fanoutID))
	}
	for _, q := range consume {
		if err := declareQueue(ch, q); err != nil {
			return fail(err)
		}
	}
	if err := declareQueue(ch, s.opts.parkingQueue()); err != nil {
		return fail(err)
	}

	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	cancelled := ch.NotifyCancel(make(chan string, len(consume)))

	for i, q := range consume {
		tag := fmt.Sprintf("%s-%s-%d", s.opts.ConnectionName, s.fanoutID[:8], i)
		var args amqp.Table
		if s.opts.StreamFanout && q.Name == s.opts.fanoutQueue("").Name {
			args = amqp.Table{"x-stream-offset": "next"}
		}
		deliveries, err := ch.Consume(q.Name, tag, false, false, false, false, args)
		if err != nil {
			return fail(fmt.Errorf("rpc: consume %s: %w", q.Name, err))
		}
		ss.tags = append(ss.tags, tag)
		queue := q.Name
		ss.consumers.Add(1)
		go func() {
			defer ss.consumers.Done()
			for d := range deliveries {
				s.accept(ss, queue, d)
			}
		}()
	}

	// One watcher turns any close or consumer cancellation into a single "lost" signal.
	ss.watcher.Add(1)
	go func() {
		defer ss.watcher.Done()
		var reason string
		select {
		case e := <-connClosed:
			reason = "connection closed"
			if e != nil {
				reason = e.Error()
			}
		case e := <-chClosed:
			reason = "channel closed"
			if e != nil {
				reason = e.Error()
			}
		case tag := <-cancelled:
			reason = "consumer " + tag + " cancelled by the broker (queue deleted?)"
		case <-ss.dead:
			return
		}
		ss.lost <- reason
	}()

	s.sessMu.Lock()
	s.sess = ss
	s.sessMu.Unlock()
	s.stats.sessions.Add(1)
	s.log.Info("rpc: consuming", "queues", s.Queues())
	return ss, nil
}

// endSession closes a session and waits for its goroutines. Messages it delivered that were
// not acknowledged are redelivered by the broker; the scheduler drops their stale copies.
func (s *Server) endSession(ss *session) {
	ss.kill()
	ss.consumers.Wait()
	ss.watcher.Wait()
	s.sessMu.Lock()
	if s.sess == ss {
		s.sess = nil
	}
	s.sessMu.Unlock()
}

// ---- intake ---------------------------------------------------------------------------------------

// task is one delivery on its way through the scheduler.
type task struct {
	sess     *session
	queue    string
	d        amqp.Delivery
	received time.Time
	msg      *Message
	req      *Request
	badErr   error
	key      string
	attempts int
	timer    *time.Timer // set while waiting for a retry
	// ctx is what the handler runs under: the server's handler context plus the log attributes
	// of this message (cluster, method, request id).
	ctx     context.Context
	settled atomic.Bool
	stats   *serverStats
}

// settle counts the delivery as no longer in flight (acknowledged, requeued or left to the broker).
func (t *task) settle() {
	if t.stats != nil && t.settled.CompareAndSwap(false, true) {
		t.stats.settled.Add(1)
	}
}

func (t *task) ack() {
	t.settle()
	if t.sess.isDead() {
		return
	}
	_ = t.d.Ack(false) // a failure means the connection is gone; the broker redelivers
}

func (t *task) requeue() {
	t.settle()
	if t.sess.isDead() {
		return
	}
	_ = t.d.Nack(false, true)
}

// accept decodes a delivery and queues it; it never blocks on handlers.
func (s *Server) accept(ss *session, queue string, d amqp.Delivery) {
	s.stats.received.Add(1)
	if d.Redelivered {
		s.stats.redelivered.Add(1)
	}
	t := &task{sess: ss, queue: queue, d: d, received: time.Now(), stats: &s.stats}
	msg, err := DecodeMessage(d.Body)
	if err != nil {
		t.badErr = err
		var de *DecodeError
		if errors.As(err, &de) && de.Partial != nil {
			t.msg = de.Partial
		}
	} else {
		t.msg = msg
		t.req = s.newRequest(t)
		t.req.Cluster = clusterOf(t.req) // for logs, whatever the serialization key is
		t.key = s.keyFunc(t.req)
	}
	if t.key == "" && t.msg != nil && t.msg.UniqueID != "" {
		// Copies of the same message still serialise, so a redelivery waits for the original.
		t.key = "uid:" + t.msg.UniqueID
	}
	t.ctx = s.handlerCtx
	if t.req != nil {
		attrs := []slog.Attr{slog.String("method", t.req.Method)}
		if t.req.Cluster != "" {
			attrs = append(attrs, slog.String("cluster", t.req.Cluster))
		}
		if t.req.Context != nil && t.req.Context.RequestID != "" {
			attrs = append(attrs, slog.String("request_id", t.req.Context.RequestID))
		}
		t.ctx = logctx.With(WithRequest(t.ctx, t.req), attrs...)
	}
	if !s.sched.submit(t) {
		t.requeue() // shutting down: leave it for the next consumer
	}
}

func (s *Server) newRequest(t *task) *Request {
	m := t.msg
	r := &Request{
		Method: m.Method, Args: m.Args, Context: m.Context,
		UniqueID: m.UniqueID, MsgID: m.MsgID, ReplyQ: m.ReplyQ, IsCall: m.IsCall(),
		Redelivered: t.d.Redelivered, Queue: t.queue, Namespace: m.Namespace, Version: m.Version,
	}
	if r.IsCall && t.d.Expiration != "" {
		if ms, err := strconv.ParseInt(t.d.Expiration, 10, 64); err == nil && ms >= 0 {
			r.Deadline = t.received.Add(time.Duration(ms) * time.Millisecond)
		}
	}
	return r
}

// ---- processing -------------------------------------------------------------------------------------

func (s *Server) work() {
	for {
		t := s.sched.next()
		if t == nil {
			return
		}
		if retryIn, again := s.process(t); again {
			s.sched.retryLater(t, retryIn)
		} else {
			s.sched.done(t)
		}
	}
}

// process runs one task; it returns (delay, true) when the handler asked to be retried.
func (s *Server) process(t *task) (time.Duration, bool) {
	if t.sess.isDead() {
		// The broker redelivers it on the new connection; running it now could not be acked.
		s.stats.dropped.Add(1)
		t.settle()
		return 0, false
	}
	if t.badErr != nil {
		s.rejectMalformed(t)
		s.observe(t, OutcomeMalformed, 0)
		return 0, false
	}
	req, ctx := t.req, t.ctx
	if prev, dup := s.dedup.get(req.UniqueID); dup {
		s.stats.duplicates.Add(1)
		s.log.InfoContext(ctx, "rpc: duplicate message, not running it again", "request", req)
		if req.IsCall && prev != nil {
			// Answer the message at hand (a redelivery carries the same _msg_id; a client that
			// re-sent under a new _msg_id waits for that one).
			r := *prev
			r.MsgID, r.UniqueID = req.MsgID, newUUIDHex()
			s.sendReply(t, &r)
		}
		t.ack()
		s.observe(t, OutcomeDuplicate, 0)
		return 0, false
	}
	if req.IsCall && !req.Deadline.IsZero() && time.Now().After(req.Deadline) {
		s.stats.expired.Add(1)
		s.log.WarnContext(ctx, "rpc: call expired before it started; not executed", "request", req)
		s.finish(t, nil, expiredCall(req.Method))
		s.observe(t, OutcomeExpired, 0)
		return 0, false
	}
	h, failure := s.resolve(req)
	if failure != nil {
		s.stats.failed.Add(1)
		if req.IsCall {
			s.finish(t, nil, failure)
		} else {
			s.park(t, failure.Class+": "+failure.Message)
		}
		s.observe(t, OutcomeRejected, 0)
		return 0, false
	}

	t.attempts++
	req.Attempt = t.attempts
	if req.FirstAttempt.IsZero() {
		req.FirstAttempt = time.Now()
	}
	start := time.Now()
	s.stats.running.Add(1)
	result, err := s.invoke(ctx, h, req)
	s.stats.running.Add(-1)
	elapsed := time.Since(start)
	if err != nil && s.handlerCtx.Err() != nil {
		// Interrupted by the shutdown timeout: the work may be half done and was not
		// recorded, so the message goes back to the queue for the next server.
		s.log.WarnContext(ctx, "rpc: handler interrupted by shutdown; message requeued", "request", req)
		t.requeue()
		s.observe(t, OutcomeInterrupted, elapsed)
		return 0, false
	}

	switch {
	case err == nil:
		raw, merr := marshalResult(result)
		if merr != nil {
			s.log.ErrorContext(ctx, "rpc: handler result cannot be encoded", "request", req, "error", merr.Error())
			s.stats.failed.Add(1)
			s.finish(t, nil, failureFor(merr))
			s.observe(t, OutcomeError, elapsed)
			return 0, false
		}
		s.stats.handled.Add(1)
		s.log.DebugContext(ctx, "rpc: handled", "request", req, "duration", elapsed)
		s.finish(t, raw, nil)
		s.observe(t, OutcomeOK, elapsed)
	case IsRetryable(err):
		if s.opts.RetryAttempts > 0 && t.attempts >= s.opts.RetryAttempts {
			s.stats.failed.Add(1)
			s.log.ErrorContext(ctx, "rpc: handler still failing after all retries", "request", req, "attempts", t.attempts, "error", err.Error())
			if req.IsCall {
				s.finish(t, nil, failureFor(errors.Unwrap(err)))
			} else {
				s.park(t, fmt.Sprintf("retries exhausted after %d attempts", t.attempts))
			}
			s.observe(t, OutcomeError, elapsed)
			return 0, false
		}
		delay := backoff(t.attempts-1, s.opts.RetryMin, s.opts.RetryMax)
		if req.IsCall && !req.Deadline.IsZero() && time.Now().Add(delay).After(req.Deadline) {
			// Retrying past the caller's deadline would only execute an expired call.
			s.stats.failed.Add(1)
			s.log.WarnContext(ctx, "rpc: retryable failure, but the call expires before the next attempt", "request", req, "error", err.Error())
			s.finish(t, nil, failureFor(errors.Unwrap(err)))
			s.observe(t, OutcomeError, elapsed)
			return 0, false
		}
		s.stats.retried.Add(1)
		s.log.WarnContext(ctx, "rpc: transient handler failure, will retry", "request", req, "error", err.Error(), "retry_in", delay.Round(time.Millisecond))
		s.observe(t, OutcomeRetry, elapsed)
		return delay, true
	default:
		var invalid *InvalidArgsError
		s.stats.failed.Add(1)
		if errors.As(err, &invalid) && !req.IsCall {
			s.log.WarnContext(ctx, "rpc: handler refused the arguments", "request", req, "error", err.Error())
			s.park(t, "invalid arguments: "+invalid.Reason)
			s.observe(t, OutcomeInvalidArgs, elapsed)
			return 0, false
		}
		s.log.WarnContext(ctx, "rpc: handler failed", "request", req, "error", err.Error(), "duration", elapsed)
		s.finish(t, nil, failureFor(err))
		s.observe(t, OutcomeError, elapsed)
	}
	return 0, false
}

// Outcomes reported to Options.Observe.
const (
	OutcomeOK          = "ok"           // the handler succeeded
	OutcomeError       = "error"        // final failure (a call got it as its reply)
	OutcomeRetry       = "retry"        // a transient failure; the message will run again
	OutcomeInvalidArgs = "invalid_args" // a cast the handler refused (parked)
	OutcomeExpired     = "expired"      // a call whose deadline had passed: not run
	OutcomeDuplicate   = "duplicate"    // already handled: not run again
	OutcomeRejected    = "rejected"     // unknown method or unsupported version
	OutcomeMalformed   = "malformed"    // undecodable
	OutcomeInterrupted = "interrupted"  // cancelled by the shutdown timeout; requeued
)

// Observation is one handled (or refused) delivery, as reported to Options.Observe.
type Observation struct {
	// Method is the method name if a handler is registered for it, else "" (so that names
	// chosen by a sender cannot grow a metric's label set).
	Method  string
	Outcome string
	// Duration is the handler's run time (zero when it did not run).
	Duration time.Duration
}

func (s *Server) observe(t *task, outcome string, d time.Duration) {
	if s.opts.Observe == nil {
		return
	}
	o := Observation{Outcome: outcome, Duration: d}
	if t.req != nil {
		if _, ok := s.handlers[t.req.Method]; ok {
			o.Method = t.req.Method
		}
	}
	s.opts.Observe(o)
}

// resolve applies oslo's dispatcher rules: namespace and version must match the (default)
// target, private methods are refused like DefaultRPCAccessPolicy, unknown ones are NoSuchMethod.
func (s *Server) resolve(req *Request) (Handler, *RemoteError) {
	if req.Namespace != "" || (req.Version != "" && !versionCompatible("1.0", req.Version)) {
		v := req.Version
		if v == "" {
			v = "1.0"
		}
		return nil, unsupportedVersion(v, req.Method)
	}
	if strings.HasPrefix(req.Method, "_") {
		return nil, noSuchMethod(req.Method)
	}
	h, ok := s.handlers[req.Method]
	if !ok {
		return nil, noSuchMethod(req.Method)
	}
	return h, nil
}

// versionCompatible is oslo's version_is_compatible(imp, version).
func versionCompatible(imp, version string) bool {
	parse := func(v string) ([3]int, bool) {
		var out [3]int
		parts := strings.Split(v, ".")
		if len(parts) > 3 {
			return out, false
		}
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil {
				return out, false
			}
			out[i] = n
		}
		return out, true
	}
	a, ok1 := parse(imp)
	b, ok2 := parse(version)
	if !ok1 || !ok2 || a[0] != b[0] {
		return false
	}
	if b[1] != a[1] {
		return b[1] < a[1]
	}
	return b[2] <= a[2]
}

// invoke runs the handler, turning a panic into a final failure.
func (s *Server) invoke(ctx context.Context, h Handler, req *Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(ctx, "rpc: handler panicked", "request", req, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			result, err = nil, fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, req)
}

func marshalResult(result any) (json.RawMessage, error) {
	if result == nil {
		return json.RawMessage("null"), nil
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	if !json.Valid(raw) {
		return nil, errors.New("handler result is not valid JSON")
	}
	return raw, nil
}

// finish completes a task: a call is answered (result or failure), the outcome is remembered
// for duplicates, and the message is acknowledged.
func (s *Server) finish(t *task, result json.RawMessage, failure *RemoteError) {
	var reply *Reply
	if t.req.IsCall {
		reply = &Reply{Result: result, Failure: failure, Ending: true, MsgID: t.req.MsgID, UniqueID: newUUIDHex()}
		s.sendReply(t, reply)
	}
	s.dedup.put(t.req.UniqueID, reply)
	t.ack()
}

// rejectMalformed answers a malformed call with a failure, or parks a malformed cast.
func (s *Server) rejectMalformed(t *task) {
	s.stats.malformed.Add(1)
	reason := t.badErr.Error()
	var de *DecodeError
	if errors.As(t.badErr, &de) {
		reason = de.Reason
	}
	if m := t.msg; m != nil && m.MsgID != "" && m.ReplyQ != "" {
		s.log.Warn("rpc: malformed call, answering with a failure", "reason", reason, "queue", t.queue, "msg_id", m.MsgID)
		reply := &Reply{Failure: malformedRequest(reason), Ending: true, MsgID: m.MsgID, UniqueID: newUUIDHex()}
		s.sendReply(t, reply)
		t.ack()
		return
	}
	s.park(t, "malformed message: "+reason)
}

// park moves a cast that can never be processed to the parking queue with the reason, then
// acknowledges it, so it is neither lost nor redelivered in a loop.
func (s *Server) park(t *task, reason string) {
	attrs := []any{"reason", reason, "queue", t.queue, "bytes", len(t.d.Body)}
	if t.req != nil {
		attrs = append(attrs, "request", t.req)
	}
	ctx := t.ctx
	if ctx == nil {
		ctx = s.handlerCtx
	}
	s.log.WarnContext(ctx, "rpc: parking message", attrs...)
	headers := amqp.Table{}
	for k, v := range t.d.Headers {
		headers[k] = v
	}
	headers[ParkReasonHeader] = reason
	headers[parkedFromHeader] = t.queue
	msg := amqp.Publishing{
		Headers: headers, ContentType: t.d.ContentType, ContentEncoding: t.d.ContentEncoding,
		DeliveryMode: amqp.Persistent, Body: t.d.Body, Timestamp: time.Now().UTC(),
	}
	ctx, cancel := context.WithTimeout(s.handlerCtx, 30*time.Second)
	defer cancel()
	if err := s.pub.publish(ctx, nil, "", s.ParkingQueue(), true, msg); err != nil {
		// Not parked: leave it unacknowledged so the broker redelivers it (to be parked then).
		s.log.Error("rpc: cannot park message; it will be redelivered", "queue", t.queue, "error", err.Error())
		time.Sleep(time.Second)
		t.requeue()
		return
	}
	s.stats.parked.Add(1)
	t.ack()
}

// sendReply publishes a reply (mandatory, confirmed). A missing reply queue is retried every
// 250 ms for MissingReplyQueueTimeout, as oslo does; then the reply is dropped.
func (s *Server) sendReply(t *task, reply *Reply) {
	replyQ := t.msg.ReplyQ
	body, err := EncodeReply(reply)
	if err != nil {
		s.log.Error("rpc: cannot encode reply", "msg_id", reply.MsgID, "error", err.Error())
		reply = &Reply{Failure: failureFor(err), Ending: true, MsgID: reply.MsgID, UniqueID: reply.UniqueID}
		if body, err = EncodeReply(reply); err != nil {
			return
		}
	}
	msg := amqp.Publishing{
		ContentType: "application/json", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Body: body,
	}
	deadline := time.Now().Add(s.opts.MissingReplyQueueTimeout)
	if s.obsolete.has(replyQ) {
		deadline = time.Now() // the queue was missing recently: one attempt only
	}
	ctx, cancel := context.WithDeadline(s.handlerCtx, deadline.Add(30*time.Second))
	defer cancel()
	for {
		err := s.pub.publish(ctx, nil, "", replyQ, true, msg)
		if err == nil {
			s.stats.replies.Add(1)
			return
		}
		if !errors.Is(err, errUnroutable) || time.Now().After(deadline) {
			s.stats.repliesDropped.Add(1)
			if errors.Is(err, errUnroutable) {
				s.obsolete.add(replyQ)
			}
			s.log.Error("rpc: reply abandoned", "msg_id", reply.MsgID, "reply_q", replyQ, "error", err.Error())
			return
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			s.stats.repliesDropped.Add(1)
			return
		}
	}
}

// ---- shutdown ----------------------------------------------------------------------------------------

func (s *Server) shutdown(workers *sync.WaitGroup) {
	s.sessMu.Lock()
	ss := s.sess
	s.sessMu.Unlock()
	// 1. Stop consuming: cancel the consumers so the broker sends nothing more.
	if ss != nil && !ss.isDead() {
		for _, tag := range ss.tags {
			_ = ss.ch.Cancel(tag, false)
		}
	}
	// 2. Requeue everything that has not started; running handlers go on.
	for _, t := range s.sched.stop() {
		t.requeue()
	}
	// 3. Wait for running handlers, up to ShutdownTimeout; then cancel their context.
	idle := make(chan struct{})
	go func() {
		workers.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-time.After(s.opts.ShutdownTimeout):
		s.log.Warn("rpc: handlers still running at the shutdown timeout; cancelling them (their messages will be redelivered)")
		s.cancelHandler()
		select {
		case <-idle:
		case <-time.After(5 * time.Second):
			s.log.Error("rpc: handlers ignore cancellation; closing the connection under them")
		}
	}
	// 4. Remove our fanout queue (Python deletes it on close too), then close.
	if ss != nil {
		if !ss.isDead() && s.opts.Fanout && !s.opts.StreamFanout {
			_, _ = ss.ch.QueueDelete(s.opts.fanoutQueue(s.fanoutID).Name, false, false, false)
		}
		s.endSession(ss)
	}
	s.pub.close()
	// Workers still stuck in a handler that ignores cancellation are abandoned here; their
	// messages were requeued by the broker when the connection closed.
}

// ---- stats -----------------------------------------------------------------------------------------

type serverStats struct {
	sessions, received, redelivered, handled, failed, retried, duplicates, expired,
	malformed, parked, replies, repliesDropped, dropped, settled, running atomic.Int64
}

// Stats are counters since the server started.
type Stats struct {
	Sessions       int64 // successful (re)connections
	Received       int64 // deliveries
	Redelivered    int64 // deliveries flagged redelivered by the broker
	Handled        int64 // handler runs that succeeded
	Failed         int64 // messages finished with a failure (incl. unknown methods)
	Retried        int64 // retries scheduled after Retry() errors
	Duplicates     int64 // duplicates recognised and not run again
	Expired        int64 // calls not executed because their deadline had passed
	Malformed      int64 // undecodable messages
	Parked         int64 // messages published to the parking queue
	Replies        int64 // replies confirmed by the broker
	RepliesDropped int64 // replies abandoned (reply queue missing)
	Dropped        int64 // stale copies from a lost connection, left for redelivery
	InFlight       int64 // deliveries received and not yet acknowledged, requeued or dropped
	Running        int64 // handlers running now
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	st := &s.stats
	return Stats{
		Sessions: st.sessions.Load(), Received: st.received.Load(), Redelivered: st.redelivered.Load(),
		Handled: st.handled.Load(), Failed: st.failed.Load(), Retried: st.retried.Load(),
		Duplicates: st.duplicates.Load(), Expired: st.expired.Load(), Malformed: st.malformed.Load(),
		Parked: st.parked.Load(), Replies: st.replies.Load(), RepliesDropped: st.repliesDropped.Load(),
		Dropped: st.dropped.Load(), InFlight: st.received.Load() - st.settled.Load(), Running: st.running.Load(),
	}
}

// Consuming reports whether the server holds a live consuming connection right now (false
// before the first connection, while reconnecting and after shutdown). Readiness and the
// magnum_service heartbeat follow it: a bridge that cannot consume must not look up.
func (s *Server) Consuming() bool {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	return s.sess != nil && !s.sess.isDead()
}

// ---- scheduler ---------------------------------------------------------------------------------------

// scheduler runs tasks in arrival order per key and in parallel across keys. A key's chain
// holds all its tasks; only the head is ever runnable, running or waiting for a retry.
type scheduler struct {
	mu       sync.Mutex
	cond     *sync.Cond
	runq     []*task
	chains   map[string][]*task
	waiting  map[*task]struct{}
	stopping bool
}

func newScheduler() *scheduler {
	s := &scheduler{chains: map[string][]*task{}, waiting: map[*task]struct{}{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// submit queues t; false when shutting down.
func (s *scheduler) submit(t *task) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	if t.key == "" {
		s.runq = append(s.runq, t)
	} else {
		chain := s.chains[t.key]
		s.chains[t.key] = append(chain, t)
		if len(chain) > 0 {
			return true // runs after its predecessors
		}
		s.runq = append(s.runq, t)
	}
	s.cond.Signal()
	return true
}

// next blocks until a task is runnable; nil when stopping.
func (s *scheduler) next() *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.runq) == 0 && !s.stopping {
		s.cond.Wait()
	}
	if s.stopping {
		return nil
	}
	t := s.runq[0]
	s.runq[0] = nil
	s.runq = s.runq[1:]
	return t
}

// done releases t's key: its successor becomes runnable.
func (s *scheduler) done(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.key == "" {
		return
	}
	chain := s.chains[t.key]
	if len(chain) > 0 && chain[0] == t {
		chain[0] = nil
		chain = chain[1:]
	}
	if len(chain) == 0 {
		delete(s.chains, t.key)
		return
	}
	s.chains[t.key] = chain
	if !s.stopping {
		s.runq = append(s.runq, chain[0])
		s.cond.Signal()
	}
}

// retryLater keeps t at the head of its chain and makes it runnable again after delay.
func (s *scheduler) retryLater(t *task, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		t.requeue()
		s.dropLocked(t)
		return
	}
	s.waiting[t] = struct{}{}
	t.timer = time.AfterFunc(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.waiting[t]; !ok {
			return // collected by stop()
		}
		delete(s.waiting, t)
		s.runq = append(s.runq, t)
		s.cond.Signal()
	})
}

func (s *scheduler) dropLocked(t *task) {
	if t.key == "" {
		return
	}
	chain := s.chains[t.key]
	for i, c := range chain {
		if c == t {
			chain = append(chain[:i:i], chain[i+1:]...)
			break
		}
	}
	if len(chain) == 0 {
		delete(s.chains, t.key)
	} else {
		s.chains[t.key] = chain
	}
}

// stop makes workers exit after their current task and returns every task that has not
// started (queued, waiting behind its key, or waiting for a retry).
func (s *scheduler) stop() []*task {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	s.cond.Broadcast()
	seen := map[*task]bool{}
	var out []*task
	add := func(t *task) {
		if t != nil && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, t := range s.runq {
		add(t)
	}
	s.runq = nil
	for t := range s.waiting {
		t.timer.Stop()
		add(t)
	}
	s.waiting = map[*task]struct{}{}
	for key, chain := range s.chains {
		// The head may be running (not in runq/waiting): keep it, hand back the rest.
		head := chain[0]
		for _, t := range chain[1:] {
			add(t)
		}
		if seen[head] {
			delete(s.chains, key)
		} else {
			s.chains[key] = chain[:1]
		}
	}
	return out
}

// ---- duplicate cache -------------------------------------------------------------------------------

// dedupCache remembers the last N finished _unique_ids (LRU) and, for calls, their reply.
type dedupCache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[string]*list.Element
}

type dedupEntry struct {
	id    string
	reply *Reply
}

func newDedupCache(max int) *dedupCache {
	return &dedupCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *dedupCache) get(id string) (*Reply, bool) {
	if id == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*dedupEntry).reply, true
}

func (c *dedupCache) put(id string, reply *Reply) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		el.Value.(*dedupEntry).reply = reply
		c.order.MoveToFront(el)
		return
	}
	c.items[id] = c.order.PushFront(&dedupEntry{id: id, reply: reply})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*dedupEntry).id)
	}
}

// obsoleteReplies remembers reply queues found missing, so that later replies to them are
// tried once instead of blocking a worker for the whole retry window (oslo keeps the same list).
type obsoleteReplies struct {
	mu    sync.Mutex
	items map[string]time.Time
}

func newObsoleteReplies() *obsoleteReplies { return &obsoleteReplies{items: map[string]time.Time{}} }

const obsoleteReplyTTL = 10 * time.Minute

func (o *obsoleteReplies) add(q string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for k, at := range o.items {
		if now.Sub(at) > obsoleteReplyTTL {
			delete(o.items, k)
		}
	}
	if len(o.items) < 1024 {
		o.items[q] = now
	}
}

func (o *obsoleteReplies) has(q string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.items[q]
	return ok && time.Since(at) < obsoleteReplyTTL
}

// newUUIDHex is uuid4().hex.
func newUUIDHex() string {
	var b [16]byte
	fillRandom(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}
