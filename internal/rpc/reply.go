package rpc

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"

	amqp "github.com/rabbitmq/amqp091-go"
)

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
		if !backoff.Sleep(ctx, 250*time.Millisecond) {
			s.stats.repliesDropped.Add(1)
			return
		}
	}
}

// newUUIDHex is uuid4().hex.
func newUUIDHex() string {
	var b [16]byte
	fillRandom(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}
