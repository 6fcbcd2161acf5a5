package rpc

import (
	"sync/atomic"
	"time"
)

// serverStats are atomic so that consumers and workers count without a lock.
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
