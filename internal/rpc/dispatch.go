package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// work is one worker: it takes runnable tasks from the scheduler until the scheduler stops.
func (s *Server) work() {
	for {
		t, ok := s.sched.next()
		if !ok {
			return
		}
		if retryIn, again := s.process(t); again {
			if !s.sched.retryLater(t, retryIn) {
				t.requeue() // shutting down: the next consumer retries it
			}
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
		if t.attempts == 1 {
			t.retry = newBackoff(s.opts.RetryMin, s.opts.RetryMax)
		}
		delay := t.retry.Step()
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
