package rpc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"
)

// ParkReasonHeader is set on every message published to the parking queue.
const ParkReasonHeader = "x-mcb-park-reason"

// parkedFromHeader names the queue a parked message was consumed from.
const parkedFromHeader = "x-mcb-parked-from"

// Server consumes magnum-conductor's queues and dispatches to registered handlers.
//
// Queues (declared exactly as oslo.messaging declares them, with the same options, since a
// declaration that differs from the existing queue is refused by the broker):
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
	sched    *scheduler[*task]
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
		obsolete: newObsoleteReplies(nil),
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
	s.sched = newScheduler(func(t *task) string { return t.key })
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
	retry := newBackoff(s.opts.ReconnectInterval, s.opts.ReconnectMax)
	for ctx.Err() == nil {
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
			delay := retry.Step()
			s.log.Warn("rpc: cannot set up consumers, retrying", "error", err.Error(), "retry_in", delay.Round(time.Millisecond))
			if !backoff.Sleep(ctx, delay) {
				break
			}
			continue
		}
		retry = newBackoff(s.opts.ReconnectInterval, s.opts.ReconnectMax) // connected: start over
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
