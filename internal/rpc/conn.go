package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"

	amqp "github.com/rabbitmq/amqp091-go"
	"k8s.io/apimachinery/pkg/util/wait"
)

// connector dials the configured brokers in turn (failover across the hosts of transport_url)
// with exponential backoff and jitter between attempts.
type connector struct {
	opts    *Options
	purpose string
	log     *slog.Logger

	mu   sync.Mutex
	next int
}

func newConnector(opts *Options, purpose string) *connector {
	c := &connector{opts: opts, purpose: purpose, log: opts.logger()}
	if len(opts.Hosts) > 1 {
		// Like oslo (which shuffles the host list), spread services over the brokers.
		c.next = rand.IntN(len(opts.Hosts))
	}
	return c
}

// newBackoff returns delays that double from base up to max, with "equal jitter": each delay
// d is drawn from [d/2, d) (half fixed, half random), so that many clients reconnecting after a
// broker restart do not arrive in lockstep. wait.Backoff adds up to Jitter times its duration,
// hence it starts from half of base and is capped at half of max. Each Step is one attempt.
func newBackoff(base, max time.Duration) wait.Backoff {
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	if max < base {
		max = base
	}
	return wait.Backoff{Duration: base / 2, Factor: 2, Jitter: 1, Steps: math.MaxInt, Cap: max / 2}
}

// connect returns a connection to the first host that answers, retrying until ctx ends.
// Errors that retrying cannot fix (bad TLS files) are returned at once.
func (c *connector) connect(ctx context.Context) (*amqp.Connection, error) {
	retry := newBackoff(c.opts.ReconnectInterval, c.opts.ReconnectMax)
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		host := c.opts.Hosts[c.next%len(c.opts.Hosts)]
		c.next = (c.next + 1) % len(c.opts.Hosts)
		c.mu.Unlock()

		conn, err := c.dial(ctx, host)
		if err == nil {
			if attempt > 0 {
				c.log.Info("rpc: connected to broker", "purpose", c.purpose, "host", hostAddr(host), "attempts", attempt+1)
			}
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isConfigError(err) {
			return nil, err
		}
		delay := retry.Step()
		// The error text of amqp091 never contains the password.
		c.log.Warn("rpc: cannot connect to broker, retrying", "purpose", c.purpose, "host", hostAddr(host),
			"error", err.Error(), "retry_in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func hostAddr(h Host) string { return net.JoinHostPort(h.Hostname, strconv.Itoa(h.Port)) }

// dial opens one connection. The TCP dial gives up when ctx ends; the TLS and AMQP handshake
// is bounded by the dial timeout.
func (c *connector) dial(ctx context.Context, h Host) (*amqp.Connection, error) {
	return c.opts.dialHost(ctx, h, c.purpose)
}

// configError marks dial errors caused by local configuration (TLS files), not the network.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

func isConfigError(err error) bool {
	var ce configError
	return errors.As(err, &ce)
}

// ---- publisher ----------------------------------------------------------------------------------

// errUnroutable is returned for a mandatory message the broker could not route: for a reply,
// the caller's reply queue is gone (it gave up or exited).
var errUnroutable = errors.New("message returned by the broker: no queue bound")

// publisher owns one connection and one channel in confirm mode. publish waits for the
// broker's confirm and retries across reconnects, so a message is delivered at least once.
type publisher struct {
	connector *connector
	log       *slog.Logger

	// mu serialises channel (re)creation and publishing. Mandatory publishes hold it until their
	// confirm arrives, so a basic.return is unambiguously theirs.
	mu       sync.Mutex
	conn     *amqp.Connection
	ch       *amqp.Channel
	returns  chan amqp.Return
	declared map[string]bool
	closed   bool
}

func newPublisher(opts *Options, purpose string) *publisher {
	return &publisher{connector: newConnector(opts, purpose), log: opts.logger()}
}

// channelLocked returns the open channel, connecting first if needed. p.mu is held.
func (p *publisher) channelLocked(ctx context.Context) (*amqp.Channel, error) {
	if p.closed {
		return nil, errors.New("rpc: publisher closed")
	}
	if p.ch != nil && !p.ch.IsClosed() && !p.conn.IsClosed() {
		return p.ch, nil
	}
	p.resetLocked()
	conn, err := p.connector.connect(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = conn.Close()
		return nil, err
	}
	p.returns = ch.NotifyReturn(make(chan amqp.Return, 4))
	p.conn, p.ch = conn, ch
	p.declared = map[string]bool{}
	return ch, nil
}

func (p *publisher) resetLocked() {
	if p.conn != nil {
		_ = p.conn.Close()
	}
	p.conn, p.ch, p.returns = nil, nil, nil
}

// publish sends one message and waits for its confirm, reconnecting and retrying on
// connection loss or nack until ctx ends. exchange, when non-nil, is declared first (once per
// channel). A mandatory message that cannot be routed yields errUnroutable (not retried here).
func (p *publisher) publish(ctx context.Context, exchange *exchangeDecl, exchangeName, key string, mandatory bool, msg amqp.Publishing) error {
	var lastErr error
	retry := newBackoff(50*time.Millisecond, p.connector.opts.ReconnectMax)
	for {
		err := p.tryPublish(ctx, exchange, exchangeName, key, mandatory, msg)
		if err == nil || errors.Is(err, errUnroutable) || errors.Is(err, errDeclarationMismatch) || isConfigError(err) {
			return err
		}
		lastErr = err
		if ctx.Err() != nil {
			return fmt.Errorf("rpc: publish to %q/%q: %w (last error: %v)", exchangeName, key, ctx.Err(), lastErr)
		}
		delay := retry.Step()
		p.log.Debug("rpc: publish failed, retrying", "exchange", exchangeName, "routing_key", key, "error", err.Error(), "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("rpc: publish to %q/%q: %w (last error: %v)", exchangeName, key, ctx.Err(), lastErr)
		case <-t.C:
		}
	}
}

func (p *publisher) tryPublish(ctx context.Context, exchange *exchangeDecl, exchangeName, key string, mandatory bool, msg amqp.Publishing) error {
	p.mu.Lock()
	locked := true
	defer func() {
		if locked {
			p.mu.Unlock()
		}
	}()
	ch, err := p.channelLocked(ctx)
	if err != nil {
		return err
	}
	if exchange != nil && !p.declared[exchange.Name] {
		if err := declareExchange(ch, *exchange); err != nil {
			p.resetLocked()
			return err
		}
		p.declared[exchange.Name] = true
	}
	returns := p.returns
	for len(returns) > 0 { // nothing should be pending; never attribute an old return to us
		<-returns
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchangeName, key, mandatory, false, msg)
	if err != nil {
		p.resetLocked()
		return err
	}
	if !mandatory {
		// Let other publishers pipeline while this one waits for its confirm.
		p.mu.Unlock()
		locked = false
	}
	select {
	case <-dc.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if !dc.Acked() {
		return errors.New("rpc: broker did not confirm the message (nack or connection lost)")
	}
	if mandatory {
		// The broker sends basic.return before basic.ack, and amqp091 hands it to our
		// buffered channel before processing the ack, so it is already there if it exists.
		select {
		case ret := <-returns:
			return fmt.Errorf("%w (%d %s)", errUnroutable, ret.ReplyCode, ret.ReplyText)
		default:
		}
	}
	return nil
}

// publishDeclaring declares queue (once per channel) and then publishes like publish, not
// mandatory: the queue exists, so the message is routed.
func (p *publisher) publishDeclaring(ctx context.Context, exchange *exchangeDecl, queue *queueDecl, key string, msg amqp.Publishing) error {
	declare := func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		ch, err := p.channelLocked(ctx)
		if err != nil {
			return err
		}
		if !p.declared[exchange.Name] {
			if err := declareExchange(ch, *exchange); err != nil {
				p.resetLocked()
				return err
			}
			p.declared[exchange.Name] = true
		}
		if !p.declared["queue:"+queue.Name] {
			if err := declareQueue(ch, *queue); err != nil {
				p.resetLocked()
				return err
			}
			p.declared["queue:"+queue.Name] = true
		}
		return nil
	}
	retry := newBackoff(50*time.Millisecond, p.connector.opts.ReconnectMax)
	for {
		err := declare()
		if err == nil {
			break
		}
		if errors.Is(err, errDeclarationMismatch) || isConfigError(err) || ctx.Err() != nil {
			return err
		}
		if !backoff.Sleep(ctx, retry.Step()) {
			return fmt.Errorf("rpc: declare %s: %w (last error: %v)", queue.Name, ctx.Err(), err)
		}
	}
	return p.publish(ctx, nil, exchange.Name, key, false, msg)
}

func (p *publisher) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.resetLocked()
}
