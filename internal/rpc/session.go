package rpc

import (
	"context"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

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

// Consuming reports whether the server holds a live consuming connection right now (false
// before the first connection, while reconnecting and after shutdown). Readiness and the
// magnum_service heartbeat follow it: a bridge that cannot consume must not look up.
func (s *Server) Consuming() bool {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	return s.sess != nil && !s.sess.isDead()
}
