package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isTransient: errors after which the same statement may succeed on another connection or a
// moment later. Constraint violations, syntax errors and the like are not.
func isTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1205, 1213, // lock wait timeout, deadlock
			1040, 1053, 1077, 1152, 1158, 1159, 1160, 1161, 1927, // too many connections, shutdown, aborted/killed connection
			2002, 2003, 2006, 2013: // can't connect, server gone away, lost connection
			return true
		}
		return false
	}
	if code := pgCode(err); code != "" {
		switch {
		case code == "40001", code == "40P01": // serialization failure, deadlock
			return true
		case len(code) == 5 && code[:2] == "08": // connection exceptions
			return true
		case code == "57P01", code == "57P02", code == "57P03": // admin/crash shutdown, cannot connect now
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// retry runs op until it succeeds, fails for good, or the retries run out. attempt counts from 1.
func (s *Store) retry(ctx context.Context, op func(attempt int) error) error {
	return s.retryPolicy().Do(ctx, isTransient, op)
}

// retryPolicy is [database] db_retry_interval, db_max_retry_interval and db_max_retries (-1: no
// limit) as oslo.db applies them: waits doubling from the interval up to the maximum.
func (s *Store) retryPolicy() backoff.Policy {
	p := backoff.Policy{Initial: s.opts.RetryInterval, Max: s.opts.MaxRetryInterval}
	if p.Initial <= 0 {
		p.Initial = 10 * time.Millisecond
	}
	if s.opts.Retries >= 0 {
		p.MaxAttempts = s.opts.Retries + 1
	}
	return p
}

// inTx runs fn in a transaction, retrying the whole transaction after transient errors.
// maybeApplied tells fn that the previous attempt failed in or after COMMIT: it may have been
// committed with only its acknowledgement lost, so fn must look for its own effect before
// writing again (each write here does). An attempt that failed before COMMIT applied nothing,
// and fn is not asked to look: a concurrent writer's identical change is not mistaken for its own.
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, maybeApplied bool) error) error {
	commitFailed := false
	return s.retry(ctx, func(attempt int) error {
		maybeApplied := commitFailed
		commitFailed = false
		s.sent("BEGIN")
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(ctx, tx, maybeApplied); err != nil {
			s.sent("ROLLBACK")
			_ = tx.Rollback()
			return err
		}
		if h := s.hooks.beforeCommit; h != nil {
			if err := h(ctx, attempt, tx); err != nil {
				s.sent("ROLLBACK")
				_ = tx.Rollback()
				return err
			}
		}
		s.sent("COMMIT")
		if err := tx.Commit(); err != nil {
			commitFailed = true
			return err
		}
		if h := s.hooks.afterCommit; h != nil {
			if err := h(attempt); err != nil {
				commitFailed = true
				return err
			}
		}
		return nil
	})
}

// exec and query rebind the ? placeholders for the dialect.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	s.sent(query)
	return tx.ExecContext(ctx, s.rebind(query), args...)
}

func (s *Store) query(ctx context.Context, q querier, query string, args ...any) (*sql.Rows, error) {
	s.sent(query)
	return q.QueryContext(ctx, s.rebind(query), args...)
}

// sent tells the test hook about a statement on its way to the server.
func (s *Store) sent(statement string) {
	if h := s.hooks.statement; h != nil {
		h(statement)
	}
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
