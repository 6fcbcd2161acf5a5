package db

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// backend is one database server the tests run against.
type backend struct {
	name string
	new  func(t testing.TB, r ...dbtest.Release) string
}

var backends = []backend{{"mariadb", dbtest.NewMySQL}, {"postgres", dbtest.NewPostgres}}

// eachBackend runs f against a fresh database of the release on MariaDB and on PostgreSQL.
func eachBackend(t *testing.T, rel dbtest.Release, f func(t *testing.T, s *Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t, b.new(t, rel))
			f(t, s)
		})
	}
}

func openTest(t testing.TB, url string) *Store {
	t.Helper()
	o := DefaultOptions(url)
	o.RetryInterval, o.MaxRetryInterval, o.Retries = 10*time.Millisecond, 50*time.Millisecond, 5
	// DeleteCluster removes node groups at once; TestDeleteClusterKeepsNodeGroupsForReaders sets a delay.
	o.NodeGroupDeleteDelay = 0
	s, err := OpenWithOptions(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// setClock fixes the store's clock.
func setClock(s *Store, t time.Time) { s.now = func() time.Time { return t } }

// rawRow reads a row with every column as the text the mysql client prints ("NULL", 0/1 for
// booleans, "YYYY-MM-DD HH:MM:SS"), on either database, for comparison with the Python dumps.
func rawRow(t testing.TB, s *Store, table, where string, args ...any) map[string]string {
	t.Helper()
	rows := rawRows(t, s, table, where, args...)
	require.Len(t, rows, 1, "%s where %s %v", table, where, args)
	return rows[0]
}

func rawRows(t testing.TB, s *Store, table, where string, args ...any) []map[string]string {
	t.Helper()
	rs, err := s.DB().QueryContext(context.Background(), s.rebind(fmt.Sprintf("SELECT * FROM %s WHERE %s ORDER BY %s", s.quote(table), where, s.quote("id"))), args...)
	require.NoError(t, err)
	defer rs.Close()
	cols, err := rs.Columns()
	require.NoError(t, err)
	var out []map[string]string
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rs.Scan(ptrs...))
		row := map[string]string{}
		for i, c := range cols {
			row[c] = rawText(vals[i])
		}
		out = append(out, row)
	}
	require.NoError(t, rs.Err())
	return out
}

func rawText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return x.Format(time.DateTime)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case int64:
		return strconv.FormatInt(x, 10)
	case []byte:
		return string(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// dump is a Python-made DB dump (shared/fixtures/magnum-*/db/<op>.txt): table -> rows.
type dump map[string][]map[string]string

var dumpKey = regexp.MustCompile(`^\s*([a-z_0-9]+): (.*)$`)

// readDump parses the `mysql -E` style dumps: "## table", "*** N. row ***", "col: value" lines,
// and continuation lines for multi-line values (certificates, keys).
func readDump(t testing.TB, release, op string) dump {
	t.Helper()
	f, err := os.Open(filepath.Join(testutil.SharedDir(t), "fixtures", "magnum-"+release, "db", op+".txt"))
	require.NoError(t, err)
	defer f.Close()
	d := dump{}
	var table string
	var row map[string]string
	var last string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			table, row = strings.TrimPrefix(line, "## "), nil
		case strings.HasPrefix(line, "# "):
		case strings.HasPrefix(line, "***"):
			row = map[string]string{}
			d[table] = append(d[table], row)
		case row != nil:
			if m := dumpKey.FindStringSubmatch(line); m != nil {
				row[m[1]], last = m[2], m[1]
			} else if last != "" {
				row[last] += "\n" + line
			}
		}
	}
	require.NoError(t, sc.Err())
	return d
}

func (d dump) row(t testing.TB, table, col, val string) map[string]string {
	t.Helper()
	for _, r := range d[table] {
		if r[col] == val {
			return r
		}
	}
	t.Fatalf("dump has no %s row with %s = %s", table, col, val)
	return nil
}

func dumpTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.DateTime, s)
	require.NoError(t, err)
	return tm
}

func dumpStr(s string) *string {
	if s == "NULL" {
		return nil
	}
	return &s
}

// wireObject returns an object argument of a captured RPC message, from the raw body bytes (so
// the order of dict keys is the one magnum-api sent).
func wireObject(t testing.TB, release, capture, arg string) *magnum.Object {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(testutil.SharedDir(t), "fixtures", "magnum-"+release, capture+".json"))
	require.NoError(t, err)
	var env struct {
		Message string `json:"oslo.message"`
	}
	require.NoError(t, json.Unmarshal(body, &env))
	var msg struct {
		Args map[string]json.RawMessage `json:"args"`
	}
	require.NoError(t, json.Unmarshal([]byte(env.Message), &msg))
	obj, err := magnum.DecodeObject(msg.Args[arg])
	require.NoError(t, err)
	return obj
}

func newUUID(t testing.TB) string {
	t.Helper()
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// execAdmin runs a statement on the store's database outside the store (e.g. what magnum-api or
// an operator would write).
func execAdmin(t testing.TB, s *Store, q string, args ...any) sql.Result {
	t.Helper()
	res, err := s.DB().ExecContext(context.Background(), s.rebind(q), args...)
	require.NoError(t, err)
	return res
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
