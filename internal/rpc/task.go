package rpc

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/logctx"
)

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
	retry    wait.Backoff // delays between handler attempts, from the first retry on
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
