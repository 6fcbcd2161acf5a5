// Package telemetry is what an operator scrapes and probes: the bridge's Prometheus metrics (all
// named magnum_capi_bridge_…, listed in docs/metrics.md) and the /healthz and /readyz endpoints,
// served together on [bridge] metrics_bind. The rest of the bridge reports into Metrics through
// small hooks (the RPC server's Observe, store and watch wrappers in internal/app); nothing here
// decides anything.
package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

const namespace = "magnum_capi_bridge"

// Dependencies named by the errors counter.
const (
	Database  = "database"
	APIServer = "apiserver"
	Keystone  = "keystone"
	RabbitMQ  = "rabbitmq"
	Barbican  = "barbican"
)

// Metrics holds every collector of the bridge in its own registry (no global state, so tests can
// build as many as they like).
type Metrics struct {
	Registry *prometheus.Registry

	rpcMessages     *prometheus.CounterVec
	rpcDuration     *prometheus.HistogramVec
	operation       *prometheus.HistogramVec
	statusLag       *prometheus.HistogramVec
	statusWrites    *prometheus.CounterVec
	watchEvents     *prometheus.CounterVec
	errors          *prometheus.CounterVec
	leader          prometheus.Gauge
	leaderChanges   prometheus.Counter
	heartbeats      *prometheus.CounterVec
	lastHeartbeat   prometheus.Gauge
	notifications   *prometheus.CounterVec
	consumingFn     func() bool
	rpcStatsFn      func() rpc.Stats
	keysReadyFn     func() int
	methodsKnown    map[string]bool
	unknownMethodLb string
}

// New registers every metric.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: reg, methodsKnown: map[string]bool{}, unknownMethodLb: "unknown"}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }

	m.rpcMessages = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "rpc", Name: "messages_total",
		Help: "RPC messages finished, by method and outcome (ok, error, retry, invalid_args, expired, duplicate, rejected, malformed, interrupted)."},
		[]string{"method", "outcome"})
	m.rpcDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "rpc", Name: "handler_duration_seconds",
		Help:    "Run time of RPC handlers, by method and outcome.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}},
		[]string{"method", "outcome"})
	m.operation = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "operation_duration_seconds",
		Help:    "Duration of cluster operations from *_IN_PROGRESS to their final status, by kind (create, update, delete) and final status.",
		Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}},
		[]string{"kind", "status"})
	m.statusLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "status", Name: "lag_seconds",
		Help:    "Time from the latest CAPI condition transition of a cluster to the Magnum row written from it, by the status written.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}},
		[]string{"status"})
	m.statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "status", Name: "writes_total",
		Help: "Cluster status changes written by the status sync, by the status written."}, []string{"status"})
	m.watchEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "watch", Name: "events_total",
		Help: "Events from the management cluster's informers, by object kind and event (add, update, delete)."}, []string{"kind", "event"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "dependency_errors_total",
		Help: "Failed requests to a dependency (database, apiserver, keystone, rabbitmq)."}, []string{"dependency"})
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "leader",
		Help: "1 while this replica holds the leader Lease (status sync, resyncs and timers run here), else 0."})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "leader_transitions_total",
		Help: "Times this replica became or stopped being the leader."})
	m.heartbeats = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "heartbeats_total",
		Help: "magnum_service heartbeats, by result (ok, error, skipped: not consuming from RabbitMQ)."}, []string{"result"})
	m.lastHeartbeat = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "last_heartbeat_timestamp_seconds",
		Help: "Unix time of the last magnum_service heartbeat written."})
	m.notifications = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "notifications_total",
		Help: "Notifications emitted on the notifications topic, by event type and result (sent, error)."}, []string{"event_type", "result"})
	for _, c := range []prometheus.Collector{m.rpcMessages, m.rpcDuration, m.operation, m.statusLag, m.statusWrites, m.watchEvents,
		m.errors, m.leader, m.leaderChanges, m.heartbeats, m.lastHeartbeat, m.notifications} {
		f(c)
	}

	stat := func(name, help string, get func(rpc.Stats) int64, gauge bool) {
		fn := func() float64 {
			if m.rpcStatsFn == nil {
				return 0
			}
			return float64(get(m.rpcStatsFn()))
		}
		opts := prometheus.Opts{Namespace: namespace, Subsystem: "rpc", Name: name, Help: help}
		if gauge {
			f(prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts), fn))
		} else {
			f(prometheus.NewCounterFunc(prometheus.CounterOpts(opts), fn))
		}
	}
	stat("messages_in_flight", "Deliveries received and not yet acknowledged or requeued (queued behind their cluster, running or waiting for a retry).",
		func(s rpc.Stats) int64 { return s.InFlight }, true)
	stat("handlers_running", "RPC handlers running now.", func(s rpc.Stats) int64 { return s.Running }, true)
	stat("retries_total", "Retries scheduled after transient handler failures.", func(s rpc.Stats) int64 { return s.Retried }, false)
	stat("parked_total", "Messages moved to the parking queue (<topic>.parked).", func(s rpc.Stats) int64 { return s.Parked }, false)
	stat("redelivered_total", "Deliveries flagged as redelivered by the broker.", func(s rpc.Stats) int64 { return s.Redelivered }, false)
	stat("connections_total", "Consuming connections established (1 + reconnects).", func(s rpc.Stats) int64 { return s.Sessions }, false)
	stat("replies_dropped_total", "Replies abandoned because the caller's reply queue was gone.", func(s rpc.Stats) int64 { return s.RepliesDropped }, false)
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "rpc", Name: "consuming",
		Help: "1 while the bridge holds a live consuming connection to RabbitMQ, else 0."}, func() float64 {
		if m.consumingFn != nil && m.consumingFn() {
			return 1
		}
		return 0
	}))

	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "pregenerated_keys_ready",
		Help: "RSA keys made ahead of creates and not yet used ([bridge] pregenerated_keys; four per create)."}, func() float64 {
		if m.keysReadyFn == nil {
			return 0
		}
		return float64(m.keysReadyFn())
	}))

	for _, d := range []string{Database, APIServer, Keystone, RabbitMQ, Barbican} {
		m.errors.WithLabelValues(d)
	}
	return m
}

// Methods declares the RPC methods the bridge serves (before the server runs): their series exist
// at zero from the start, so rates and alerts work before the first message, and any other name
// is counted as "unknown".
func (m *Metrics) Methods(methods []string) {
	for _, meth := range methods {
		m.methodsKnown[meth] = true
		for _, o := range []string{rpc.OutcomeOK, rpc.OutcomeError, rpc.OutcomeRetry} {
			m.rpcMessages.WithLabelValues(meth, o)
			m.rpcDuration.WithLabelValues(meth, o)
		}
	}
}

// WatchRPC reads the RPC server's counters and consuming state at every scrape.
func (m *Metrics) WatchRPC(stats func() rpc.Stats, consuming func() bool) {
	m.rpcStatsFn, m.consumingFn = stats, consuming
}

// WatchKeyPool reads how many pregenerated keys are ready at every scrape.
func (m *Metrics) WatchKeyPool(ready func() int) { m.keysReadyFn = ready }

// ObserveRPC is the RPC server's Observe hook.
func (m *Metrics) ObserveRPC(o rpc.Observation) {
	method := o.Method
	if !m.methodsKnown[method] {
		method = m.unknownMethodLb
	}
	m.rpcMessages.WithLabelValues(method, o.Outcome).Inc()
	if o.Duration > 0 {
		m.rpcDuration.WithLabelValues(method, o.Outcome).Observe(o.Duration.Seconds())
	}
}

// Operation records a cluster operation that reached its final status.
func (m *Metrics) Operation(kind, status string, d time.Duration) {
	m.operation.WithLabelValues(kind, status).Observe(d.Seconds())
}

// StatusWritten records a status the status sync wrote and how long after CAPI's transition.
// lag < 0 means unknown (only the write is counted).
func (m *Metrics) StatusWritten(status string, lag time.Duration) {
	m.statusWrites.WithLabelValues(status).Inc()
	if lag >= 0 {
		m.statusLag.WithLabelValues(status).Observe(lag.Seconds())
	}
}

// WatchEvent counts one informer event.
func (m *Metrics) WatchEvent(kind, event string) { m.watchEvents.WithLabelValues(kind, event).Inc() }

// DependencyError counts one failed request to a dependency.
func (m *Metrics) DependencyError(dependency string) { m.errors.WithLabelValues(dependency).Inc() }

// Leading records a leadership change.
func (m *Metrics) Leading(leader bool) {
	v := 0.0
	if leader {
		v = 1
	}
	m.leader.Set(v)
	m.leaderChanges.Inc()
}

// Heartbeat records a heartbeat result: "ok", "error" or "skipped".
func (m *Metrics) Heartbeat(result string) {
	m.heartbeats.WithLabelValues(result).Inc()
	if result == "ok" {
		m.lastHeartbeat.SetToCurrentTime()
	}
}

// Notification records one notification sent (err nil) or lost.
func (m *Metrics) Notification(eventType string, err error) {
	result := "sent"
	if err != nil {
		result = "error"
	}
	m.notifications.WithLabelValues(eventType, result).Inc()
}
