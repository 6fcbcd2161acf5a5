package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// ReportServiceUp is one heartbeat, as MagnumServicePeriodicTasks.update_magnum_service does it:
// the (host, binary) row is inserted if absent (report_count 0, disabled 0, forced_down 0,
// created_at now), then report_count+1, last_seen_up = updated_at = now. magnum-api shows the
// service "up" while last_seen_up is within [DEFAULT] service_down_time (180 s). Operator flags
// (disabled, disabled_reason, forced_down) are left alone.
func (s *Store) ReportServiceUp(ctx context.Context, host, binary string) (*MagnumService, error) {
	if host == "" || binary == "" {
		return nil, errors.New("report service: host and binary are required")
	}
	now := s.timestamp()
	where := s.quote("host") + " = ? AND " + s.quote("binary") + " = ?"
	var result *MagnumService
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error {
		row, err := s.selectOne(ctx, tx, serviceTable, where+" FOR UPDATE", host, binary)
		if errors.Is(err, sql.ErrNoRows) {
			// Two replicas on one host (or a race with a restart) may insert together: the loser
			// of the unique (host, binary) key inserts nothing and both go on to the update.
			onConflict := " ON CONFLICT DO NOTHING"
			if s.name() == MySQL {
				onConflict = " ON DUPLICATE KEY UPDATE " + s.quote("id") + " = " + s.quote("id")
			}
			cols := []string{"created_at", "host", "binary", "report_count", "disabled", "forced_down"}
			if _, err := s.exec(ctx, tx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (?, ?, ?, 0, ?, ?)%s",
				s.quote(serviceTable.name), s.quoteCols(cols), onConflict), now, host, binary, false, false); err != nil {
				return err
			}
			row, err = s.selectOne(ctx, tx, serviceTable, where+" FOR UPDATE", host, binary)
		}
		if err != nil {
			return err
		}
		cur := serviceFrom(row)
		// A previous attempt of this heartbeat committed if the row carries its timestamp.
		if maybeApplied && cur.LastSeenUp != nil && cur.LastSeenUp.Equal(now) && cur.UpdatedAt != nil && cur.UpdatedAt.Equal(now) {
			result = cur
			return nil
		}
		if _, err := s.exec(ctx, tx, fmt.Sprintf("UPDATE %s SET %s = ?, %s = ?, %s = ? WHERE %s = ?",
			s.quote(serviceTable.name), s.quote("report_count"), s.quote("last_seen_up"), s.quote("updated_at"), s.quote("id")),
			cur.ReportCount+1, now, now, cur.ID); err != nil {
			return err
		}
		row, err = s.selectOne(ctx, tx, serviceTable, s.quote("id")+" = ?", cur.ID)
		if err != nil {
			return err
		}
		result = serviceFrom(row)
		return nil
	})
	if err != nil {
		return nil, opError(fmt.Sprintf("heartbeat of %s on %s", binary, host), err)
	}
	return result, nil
}

// GetService reads the (host, binary) row; magnum's MagnumServiceNotFound is not needed by the
// bridge, so a missing row is (nil, nil).
func (s *Store) GetService(ctx context.Context, host, binary string) (*MagnumService, error) {
	row, err := s.readOne(ctx, serviceTable, s.quote("host")+" = ? AND "+s.quote("binary")+" = ?", host, binary)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, opError("get service", err)
	}
	return serviceFrom(row), nil
}

// HostFromConfig is the host the conductor reports as: [DEFAULT] host, or the machine's host name
// (Python's socket.gethostname()).
func HostFromConfig(f *config.File) (string, error) {
	if h := f.String("DEFAULT", "host", ""); h != "" {
		return h, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", &config.Error{Section: "DEFAULT", Key: "host", Reason: fmt.Sprintf("is not set and the host name is unknown (%v)", err)}
	}
	return h, nil
}

// MaxHeartbeatInterval: Python beats every 60 s and magnum-api calls a service down after
// service_down_time (180 s) without one.
const MaxHeartbeatInterval = 60 * time.Second

// Heartbeat keeps the bridge's magnum_service row fresh: one beat at start, then one every
// Interval until the context ends. A failed beat is logged and the next one tried on time.
type Heartbeat struct {
	Store *Store
	// Host is [DEFAULT] host (HostFromConfig).
	Host string
	// Binary defaults to "magnum-conductor", the only value magnum-api accepts.
	Binary string
	// Interval between beats, at most MaxHeartbeatInterval (the default).
	Interval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnBeat, if set, is told about every beat (for metrics and tests).
	OnBeat func(*MagnumService, error)
	// Alive, if set, gates the beats: while it reports false (the bridge cannot consume from
	// RabbitMQ) no beat is written, so magnum-api shows the conductor down after
	// service_down_time, as it does for a Python conductor that lost its broker. The first beat
	// after it turns true again is written within a second.
	Alive func() bool
}

// Run beats until ctx ends; it returns nil then, or an error at once for a bad configuration.
func (h *Heartbeat) Run(ctx context.Context) error {
	if h.Store == nil || h.Host == "" {
		return errors.New("heartbeat: a store and a host are required")
	}
	binary := h.Binary
	if binary == "" {
		binary = magnum.ConductorBinary
	}
	interval := h.Interval
	if interval <= 0 {
		interval = MaxHeartbeatInterval
	}
	if interval > MaxHeartbeatInterval {
		return fmt.Errorf("heartbeat: interval %s is longer than %s; magnum-api would show the service down", interval, MaxHeartbeatInterval)
	}
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	beat := func() {
		// A beat may not outlast the next one: a hung database must not pile them up.
		bctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		svc, err := h.Store.ReportServiceUp(bctx, h.Host, binary)
		if err != nil && ctx.Err() == nil {
			log.Warn("heartbeat failed", "host", h.Host, "binary", binary, "error", err)
		}
		if h.OnBeat != nil && ctx.Err() == nil {
			h.OnBeat(svc, err)
		}
	}
	paused := false
	gated := func() {
		if h.Alive != nil && !h.Alive() {
			if !paused {
				log.Warn("heartbeat paused: the bridge cannot consume RPC messages; magnum-api will show it down", "host", h.Host, "binary", binary)
			}
			paused = true
			return
		}
		if paused {
			log.Info("heartbeat resumed", "host", h.Host, "binary", binary)
		}
		paused = false
		beat()
	}
	gated()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			gated()
		case <-poll.C:
			if paused {
				gated()
			}
		}
	}
}
