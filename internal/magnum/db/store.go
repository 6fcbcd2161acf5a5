// Package db is the bridge's access to Magnum's own database: the rows magnum-api reads and the
// conductor owns (cluster, nodegroup, x509keypair, magnum_service) plus the cluster templates it
// reads, on MariaDB/MySQL or PostgreSQL, in the schema Magnum's migrations create.
//
// It writes what Python's conductor writes, the way SQLAlchemy writes it: naive-UTC timestamps
// with second precision set by the client (the schema has no defaults), JSON columns as
// json.dumps text with NULL stored as {} or [], booleans as 0/1. It finds out which Magnum
// release made the schema by looking at the columns (trusts dropped in 23.0.0, node labels added,
// cluster_template.driver from 18.0.0). Writes that race other writers can be guarded by the
// row's status and updated_at, and every write is safe to retry after a lost connection.
// See docs/database.md.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/backoff"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

func init() {
	// go-sql-driver logs dropped connections to the standard logger; they are retried here, so
	// they belong in debug output, not on stderr.
	_ = mysql.SetLogger(mysqlLogger{})
}

type mysqlLogger struct{}

func (mysqlLogger) Print(v ...any) { slog.Debug("mysql driver", "message", fmt.Sprint(v...)) }

// Options configure a Store. OptionsFromConfig reads them from magnum.conf's [database] section.
type Options struct {
	// Connection is the SQLAlchemy URL ([database] connection).
	Connection string
	// MaxOpenConns caps the pool ([database] max_pool_size + max_overflow; default 5 + 50).
	MaxOpenConns int
	// MaxIdleConns ([database] max_pool_size, default 5).
	MaxIdleConns int
	// ConnMaxLifetime recycles connections ([database] connection_recycle_time, default 3600 s),
	// so that a server-side wait_timeout never hands out a dead one.
	ConnMaxLifetime time.Duration
	// ConnectRetries and ConnectRetryInterval: attempts to reach the database at Open
	// ([database] max_retries, retry_interval; 0 = try once).
	ConnectRetries       int
	ConnectRetryInterval time.Duration
	// Retries, RetryInterval and MaxRetryInterval: how often a read or write is retried after a
	// transient error (lost connection, deadlock, serialization failure), doubling the wait
	// ([database] db_max_retries 20, db_retry_interval 1 s, db_max_retry_interval 10 s).
	Retries          int
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// NodeGroupDeleteDelay is how long DeleteCluster keeps a deleted cluster's node group rows:
	// longer than any magnum-api request takes between reading a cluster row and its node groups.
	NodeGroupDeleteDelay time.Duration
}

// DefaultNodeGroupDeleteDelay: a magnum-api request reads a cluster's node groups within
// milliseconds of its row; a list of 50 clusters on an overloaded 2-core host took over 30 s.
const DefaultNodeGroupDeleteDelay = time.Minute

// DefaultOptions are oslo.db's defaults, except that Open does not retry connecting.
func DefaultOptions(connection string) Options {
	return Options{
		Connection: connection, MaxOpenConns: 55, MaxIdleConns: 5, ConnMaxLifetime: time.Hour,
		Retries: 20, RetryInterval: time.Second, MaxRetryInterval: 10 * time.Second,
		NodeGroupDeleteDelay: DefaultNodeGroupDeleteDelay,
	}
}

// OptionsFromConfig reads [database] from magnum.conf. The connection is required.
func OptionsFromConfig(f *config.File) (Options, error) {
	conn := f.String("database", "connection", "")
	if conn == "" {
		return Options{}, &config.Error{Section: "database", Key: "connection", Reason: "is not set"}
	}
	if _, err := ParseURL(conn); err != nil {
		return Options{}, &config.Error{Section: "database", Key: "connection", Reason: err.Error()}
	}
	o := DefaultOptions(conn)
	var err error
	pool, err := f.Int("database", "max_pool_size", 5, 0, 10000)
	if err != nil {
		return Options{}, err
	}
	overflow, err := f.Int("database", "max_overflow", 50, 0, 10000)
	if err != nil {
		return Options{}, err
	}
	o.MaxIdleConns, o.MaxOpenConns = pool, pool+overflow
	if o.ConnMaxLifetime, err = f.Seconds("database", "connection_recycle_time", time.Hour); err != nil {
		return Options{}, err
	}
	if o.ConnectRetries, err = f.Int("database", "max_retries", 10, -1, 1000000); err != nil {
		return Options{}, err
	}
	if o.ConnectRetryInterval, err = f.Seconds("database", "retry_interval", 10*time.Second); err != nil {
		return Options{}, err
	}
	if o.Retries, err = f.Int("database", "db_max_retries", 20, -1, 1000000); err != nil {
		return Options{}, err
	}
	if o.RetryInterval, err = f.Seconds("database", "db_retry_interval", time.Second); err != nil {
		return Options{}, err
	}
	if o.MaxRetryInterval, err = f.Seconds("database", "db_max_retry_interval", 10*time.Second); err != nil {
		return Options{}, err
	}
	return o, nil
}

// Store is Magnum's database. Safe for concurrent use.
type Store struct {
	db     *sql.DB
	target *Target
	dialect
	schema Schema
	opts   Options
	// now is the clock (tests may replace it); values are truncated to seconds, UTC.
	now   func() time.Time
	hooks testHooks
	// closing ends with Close; background counts DeleteCluster's delayed node group removals.
	closing    context.Context
	closeNow   context.CancelFunc
	background sync.WaitGroup
	// ownerTable is set once the owner table is known to exist (ensureOwnerTable).
	ownerTable atomic.Bool
}

// testHooks inject faults in tests: beforeCommit runs inside the transaction just before COMMIT,
// afterCommit right after a successful one (returning an error simulates a commit whose
// acknowledgement was lost). statement is told of every statement the store sends (BEGIN,
// COMMIT and ROLLBACK included), for tests that count round trips. Set them before the store is
// used concurrently.
type testHooks struct {
	beforeCommit func(ctx context.Context, attempt int, tx *sql.Tx) error
	afterCommit  func(attempt int) error
	statement    func(statement string)
}

// Open connects with DefaultOptions and checks that the schema is Magnum's.
func Open(ctx context.Context, connection string) (*Store, error) {
	return OpenWithOptions(ctx, DefaultOptions(connection))
}

// OpenWithOptions connects, waits for the database as configured, and detects the schema. Every
// error names what failed (URL, server, database, table) and never the password.
func OpenWithOptions(ctx context.Context, o Options) (*Store, error) {
	t, err := ParseURL(o.Connection)
	if err != nil {
		return nil, err
	}
	s := &Store{target: t, opts: o, now: time.Now}
	var driverName, dsn string
	switch t.Dialect {
	case MySQL:
		driverName, s.dialect = "mysql", mysqlDialect{}
		dsn, err = t.mysqlDSN()
	case Postgres:
		driverName, s.dialect = "pgx", pgDialect{}
		dsn, err = t.pgDSN()
	}
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("database %s: %v", t, err)
	}
	if o.MaxOpenConns > 0 {
		db.SetMaxOpenConns(o.MaxOpenConns)
	}
	if o.MaxIdleConns > 0 {
		db.SetMaxIdleConns(o.MaxIdleConns)
	}
	if o.ConnMaxLifetime > 0 {
		db.SetConnMaxLifetime(o.ConnMaxLifetime)
	}
	s.db = db
	if err := s.connect(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if s.schema, err = s.detectSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	s.closing, s.closeNow = context.WithCancel(context.Background())
	return s, nil
}

func (s *Store) connect(ctx context.Context) error {
	// ConnectRetries counts retries (-1: no end); an interval of 0 still retries, a millisecond apart.
	policy := backoff.Policy{Initial: max(s.opts.ConnectRetryInterval, time.Millisecond), Fixed: true}
	if s.opts.ConnectRetries >= 0 {
		policy.MaxAttempts = s.opts.ConnectRetries + 1
	}
	return policy.Do(ctx, isTransient, func(int) error {
		err := s.db.PingContext(ctx)
		if err == nil {
			return nil
		}
		return fmt.Errorf("cannot connect to %s database %q at %s as %q: %w",
			s.target.Dialect, s.target.Database, s.target.Address(), s.target.User, err)
	})
}

// Close cancels the delayed node group removals still pending (DeleteCluster; a later one
// catches up on them) and closes the pool.
func (s *Store) Close() error {
	s.closeNow()
	s.background.Wait()
	return s.db.Close()
}

// Schema is what Open found.
func (s *Store) Schema() Schema { return s.schema }

// Target is the parsed connection URL (String() hides the password).
func (s *Store) Target() *Target { return s.target }

// DB exposes the pool for what this package does not cover; writes through it bypass the
// encodings and guards.
func (s *Store) DB() *sql.DB { return s.db }

// timestamp is "now" as Magnum stores it: naive UTC, whole seconds.
func (s *Store) timestamp() time.Time { return s.now().UTC().Truncate(time.Second) }

// dialect hides the SQL differences between MySQL and PostgreSQL.
type dialect interface {
	name() Dialect
	quote(ident string) string
	rebind(query string) string
	// nullSafeEq is "a equals b, NULL equal to NULL".
	nullSafeEq(col string) string
	isDuplicate(err error) bool
	// skipDuplicates ends an INSERT so that rows whose unique column col is taken are skipped
	// and the others inserted, RowsAffected counting them; "" where the dialect cannot say so
	// without also downgrading other errors (then the INSERT fails with a duplicate error).
	skipDuplicates(col string) string
}

type mysqlDialect struct{}

func (mysqlDialect) name() Dialect                { return MySQL }
func (mysqlDialect) quote(id string) string       { return "`" + id + "`" }
func (mysqlDialect) rebind(q string) string       { return q }
func (mysqlDialect) nullSafeEq(col string) string { return col + " <=> ?" }
func (mysqlDialect) isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// skipDuplicates: INSERT IGNORE would also turn a too-long value or a NULL into a warning, and
// ON DUPLICATE KEY UPDATE counts a kept row as affected under CLIENT_FOUND_ROWS. A duplicate fails
// the statement instead; InnoDB undoes the whole statement and the transaction goes on.
func (mysqlDialect) skipDuplicates(string) string { return "" }

type pgDialect struct{}

func (pgDialect) name() Dialect          { return Postgres }
func (pgDialect) quote(id string) string { return `"` + id + `"` }
func (pgDialect) rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
func (pgDialect) nullSafeEq(col string) string { return col + " IS NOT DISTINCT FROM ?" }
func (pgDialect) isDuplicate(err error) bool   { return pgCode(err) == "23505" }

// skipDuplicates: a failed statement would abort PostgreSQL's whole transaction.
func (p pgDialect) skipDuplicates(col string) string {
	return " ON CONFLICT (" + p.quote(col) + ") DO NOTHING"
}

// quoteCols quotes and joins column names.
func (s *Store) quoteCols(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = s.quote(c)
	}
	return strings.Join(q, ", ")
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
