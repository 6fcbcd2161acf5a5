// Package dbtest gives tests a fresh database holding Magnum's real schema, on the MariaDB and
// PostgreSQL servers the tests use (internal/testutil), and drops it when the test ends:
//
//	url := dbtest.NewMySQL(t)                         // Magnum 15.0.1 (Zed) schema
//	url := dbtest.NewPostgres(t, dbtest.Release23)    // Magnum 23.0.0 schema
//	store, err := db.Open(ctx, url)
//
// The URL is a SQLAlchemy URL, as magnum.conf's [database] connection holds it.
//
// The Zed schema is made once per server by Magnum's own migrations
// (deploy/local/magnum-schema.sh runs magnum-db-manage upgrade, installing Debian's
// python3-magnum if needed) into a template database, mcb_schema_zed, which later runs reuse;
// each test gets a copy of its tables (MariaDB: CREATE TABLE … LIKE; PostgreSQL: CREATE DATABASE
// … TEMPLATE), which takes well under a second. The other releases are derived:
//
//   - Release2024 (18.0.0 … 22.x): Zed plus cluster_template.driver (alembic c0f832afc4fd).
//   - Release23 (23.0.0): on MariaDB the `SHOW CREATE TABLE` output captured from a real 23.0.0
//     database; on PostgreSQL, where no 23.0.0 capture exists, the 15→23 alembic revisions
//     (c0f832afc4fd, d7e6a4d39fe4, b3e1cf4a2d5e) applied on top of the migrated Zed schema.
//
// Both are the integration tier (testutil.Integration): they skip the test unless it is built with
// the `integration` tag.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Release selects the schema a test database gets.
type Release int

const (
	// Zed is Magnum 15.0.1, made by magnum-db-manage (alembic head 7da8489d6a68).
	Zed Release = iota
	// Release2024 is Magnum 18.0.0 … 22.x: Zed plus cluster_template.driver.
	Release2024
	// Release23 is Magnum 23.0.0 (alembic head b3e1cf4a2d5e): trusts dropped, nodegroup
	// node_labels/node_taints added.
	Release23
)

func (r Release) String() string {
	return [...]string{"zed", "2024", "23"}[r]
}

// TemplateDB is the database holding the migrated Zed schema on each server.
const TemplateDB = "mcb_schema_zed"

// ZedHead is the alembic revision of Magnum 15.0.1's schema.
const ZedHead = "7da8489d6a68"

// The alembic revisions after Zed.
const (
	revDriver      = "c0f832afc4fd"
	revDropTrusts  = "d7e6a4d39fe4"
	revNodeLabels  = "b3e1cf4a2d5e"
	templateMarker = "magnum schema " + ZedHead + " complete"
)

// SchemaScript is the script that runs Magnum's migrations.
func SchemaScript() string {
	return filepath.Join(testutil.RepoRoot(), "deploy", "local", "magnum-schema.sh")
}

// NewMySQL creates a database with the release's schema (default Zed) on the test MariaDB and
// returns its SQLAlchemy URL; the database is dropped when the test ends.
func NewMySQL(t testing.TB, release ...Release) string {
	t.Helper()
	testutil.Require(t, testutil.Integration)
	rel := pick(release)
	admin, cfg := mysqlAdmin(t)
	ctx := context.Background()
	if rel != Release23 {
		ensureMySQLTemplate(t, admin, cfg)
	}
	name := uniqueName(t)
	mustExec(t, admin, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb3")
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	switch rel {
	case Release23:
		loadShowCreate(t, admin, name, filepath.Join(testutil.SharedDir(t), "fixtures", "magnum-23.0.0", "schema", "magnum_new.show-create.sql"))
		mustExec(t, admin, "CREATE TABLE `"+name+"`.alembic_version (version_num VARCHAR(32) NOT NULL, PRIMARY KEY (version_num))")
		mustExec(t, admin, "INSERT INTO `"+name+"`.alembic_version VALUES ('"+revNodeLabels+"')")
	default:
		rows, err := admin.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", TemplateDB)
		if err != nil {
			t.Fatalf("dbtest: list template tables: %v", err)
		}
		var tables []string
		for rows.Next() {
			var tn string
			if err := rows.Scan(&tn); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, tn)
		}
		rows.Close()
		for _, tn := range tables {
			mustExec(t, admin, fmt.Sprintf("CREATE TABLE `%s`.`%s` LIKE `%s`.`%s`", name, tn, TemplateDB, tn))
		}
		mustExec(t, admin, fmt.Sprintf("INSERT INTO `%s`.alembic_version SELECT * FROM `%s`.alembic_version", name, TemplateDB))
		if rel == Release2024 {
			mustExec(t, admin, "ALTER TABLE `"+name+"`.cluster_template ADD COLUMN driver VARCHAR(255) NULL")
			mustExec(t, admin, "UPDATE `"+name+"`.alembic_version SET version_num = '"+revDriver+"'")
		}
	}
	return mysqlURL(cfg, name)
}

// NewPostgres creates a database with the release's schema (default Zed) on the test
// PostgreSQL and returns its SQLAlchemy URL; the database is dropped when the test ends.
func NewPostgres(t testing.TB, release ...Release) string {
	t.Helper()
	testutil.Require(t, testutil.Integration)
	rel := pick(release)
	admin, base := pgAdmin(t)
	ensurePostgresTemplate(t, admin, base)
	name := uniqueName(t)
	createFromTemplate(t, admin, name)
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	if rel != Zed {
		db := openPG(t, pgURLFor(base, name, "postgres"))
		defer db.Close()
		mustExec(t, db, `ALTER TABLE cluster_template ADD COLUMN driver VARCHAR(255)`)
		mustExec(t, db, `UPDATE alembic_version SET version_num = '`+revDriver+`'`)
		if rel == Release23 {
			mustExec(t, db, `ALTER TABLE cluster DROP COLUMN trust_id, DROP COLUMN trustee_username, DROP COLUMN trustee_user_id, DROP COLUMN trustee_password`)
			mustExec(t, db, `UPDATE alembic_version SET version_num = '`+revDropTrusts+`'`)
			mustExec(t, db, `ALTER TABLE nodegroup ADD COLUMN node_labels TEXT, ADD COLUMN node_taints TEXT`)
			mustExec(t, db, `UPDATE alembic_version SET version_num = '`+revNodeLabels+`'`)
		}
	}
	return pgURLFor(base, name, "postgresql+psycopg2")
}

func pick(r []Release) Release {
	if len(r) == 0 {
		return Zed
	}
	return r[0]
}

// uniqueName is a database name that will not collide with parallel tests or other packages.
func uniqueName(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "mcb_t_" + hex.EncodeToString(b)
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("dbtest: %s: %v", firstLine(q), err)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// --- MariaDB ---

func mysqlAdmin(t testing.TB) (*sql.DB, *mysql.Config) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatalf("dbtest: MCB_TEST_MYSQL_DSN: %v", err)
	}
	cfg.DBName = ""
	cfg.MultiStatements = false
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("dbtest: the test MariaDB at %s is not reachable (MCB_TEST_MYSQL_DSN): %v", cfg.Addr, err)
	}
	return db, cfg
}

// mysqlURL is the SQLAlchemy URL for a database on the admin's server, as the admin user.
func mysqlURL(cfg *mysql.Config, dbName string) string {
	u := &url.URL{Scheme: "mysql+pymysql", Path: "/" + dbName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else {
		u.User = url.User(cfg.User)
	}
	q := url.Values{"charset": {"utf8"}}
	if cfg.Net == "unix" {
		q.Set("unix_socket", cfg.Addr)
	} else {
		u.Host = cfg.Addr
	}
	u.RawQuery = q.Encode()
	return u.String()
}

var templateOnce sync.Map // server key -> *sync.Mutex, so one test process creates a template once

func serverLock(key string) *sync.Mutex {
	m, _ := templateOnce.LoadOrStore(key, &sync.Mutex{})
	return m.(*sync.Mutex)
}

func mysqlTemplateReady(ctx context.Context, admin *sql.DB) bool {
	var v string
	err := admin.QueryRowContext(ctx, "SELECT version_num FROM `"+TemplateDB+"`.alembic_version").Scan(&v)
	return err == nil && v == ZedHead
}

func ensureMySQLTemplate(t testing.TB, admin *sql.DB, cfg *mysql.Config) {
	t.Helper()
	mu := serverLock("mysql " + cfg.Addr)
	mu.Lock()
	defer mu.Unlock()
	ctx := context.Background()
	if mysqlTemplateReady(ctx, admin) {
		return
	}
	// Other test processes (other packages) may be here too: one builds, the others wait.
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 900)", TemplateDB).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("dbtest: could not lock the template build (GET_LOCK %s): %v", TemplateDB, err)
	}
	defer conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", TemplateDB) // its error ignored: the session lock goes with the connection closed just after
	if mysqlTemplateReady(ctx, admin) {
		return
	}
	mustExec(t, admin, "DROP DATABASE IF EXISTS `"+TemplateDB+"`")
	mustExec(t, admin, "CREATE DATABASE `"+TemplateDB+"` CHARACTER SET utf8mb3")
	runSchemaScript(t, mysqlURL(cfg, TemplateDB))
	if !mysqlTemplateReady(ctx, admin) {
		t.Fatalf("dbtest: %s ran but %s.alembic_version is not %s", SchemaScript(), TemplateDB, ZedHead)
	}
}

// loadShowCreate runs the CREATE TABLE statements of a SHOW CREATE TABLE dump in database name.
func loadShowCreate(t testing.TB, admin *sql.DB, name, file string) {
	t.Helper()
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	ctx := context.Background()
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "USE `"+name+"`"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, stmt := range strings.Split(string(body), "\n;") {
		if stmt = strings.TrimSpace(stmt); stmt == "" {
			continue
		}
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("dbtest: %s: %s: %v", filepath.Base(file), firstLine(stmt), err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("dbtest: %s holds no statement", file)
	}
}

// --- PostgreSQL ---

func pgAdmin(t testing.TB) (*sql.DB, *url.URL) {
	t.Helper()
	base, err := url.Parse(testutil.PostgresURL())
	if err != nil {
		t.Fatalf("dbtest: MCB_TEST_PG_URL: %v", err)
	}
	return openPG(t, base.String()), base
}

func openPG(t testing.TB, u string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", strings.Replace(u, "postgresql+psycopg2://", "postgres://", 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("dbtest: the test PostgreSQL is not reachable (MCB_TEST_PG_URL): %v", err)
	}
	return db
}

// pgURLFor is base with another database and scheme.
func pgURLFor(base *url.URL, dbName, scheme string) string {
	u := *base
	u.Scheme = scheme
	u.Path = "/" + dbName
	return u.String()
}

// The template's state lives in its comment, readable without connecting to it: PostgreSQL
// refuses to copy a database anyone is connected to.
func pgTemplateReady(ctx context.Context, admin *sql.DB) bool {
	var comment sql.NullString
	err := admin.QueryRowContext(ctx,
		`SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, TemplateDB).Scan(&comment)
	return err == nil && comment.String == templateMarker
}

// pgLockKey is the advisory lock guarding the template (exclusive to build, shared to copy).
const pgLockKey = 0x6d63625f7a6564 // "mcb_zed"

func ensurePostgresTemplate(t testing.TB, admin *sql.DB, base *url.URL) {
	t.Helper()
	mu := serverLock("pg " + base.Host)
	mu.Lock()
	defer mu.Unlock()
	ctx := context.Background()
	if pgTemplateReady(ctx, admin) {
		return
	}
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, pgLockKey); err != nil {
		t.Fatalf("dbtest: lock the template build: %v", err)
	}
	defer conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, pgLockKey) // its error ignored: the session lock goes with the connection closed just after
	if pgTemplateReady(ctx, admin) {
		return
	}
	mustExec(t, admin, `DROP DATABASE IF EXISTS "`+TemplateDB+`" WITH (FORCE)`)
	mustExec(t, admin, `CREATE DATABASE "`+TemplateDB+`"`)
	runSchemaScript(t, pgURLFor(base, TemplateDB, "postgresql+psycopg2"))
	mustExec(t, admin, `COMMENT ON DATABASE "`+TemplateDB+`" IS '`+templateMarker+`'`)
}

func createFromTemplate(t testing.TB, admin *sql.DB, name string) {
	t.Helper()
	ctx := context.Background()
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock_shared($1)`, pgLockKey); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `SELECT pg_advisory_unlock_shared($1)`, pgLockKey) // its error ignored: the session lock goes with the connection closed just after
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		_, lastErr = conn.ExecContext(ctx, `CREATE DATABASE "`+name+`" TEMPLATE "`+TemplateDB+`"`)
		// 55006: someone is connected to the template (a stray session); it goes away soon.
		if lastErr == nil || !strings.Contains(lastErr.Error(), "55006") {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("dbtest: create database %s from %s: %v", name, TemplateDB, lastErr)
	}
}

// --- the migrations ---

func runSchemaScript(t testing.TB, sqlalchemyURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", SchemaScript(), sqlalchemyURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dbtest: %s failed (%v):\n%s", SchemaScript(), err, tail(string(out), 40))
	}
	t.Logf("dbtest: built template %s with Magnum's migrations in %s", hostOf(sqlalchemyURL), time.Since(start).Round(time.Second))
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "?"
	}
	host, _, _ := net.SplitHostPort(p.Host)
	return p.Scheme + " " + host + p.Path
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
