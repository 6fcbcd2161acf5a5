package db

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		in                    string
		dialect               Dialect
		user, pass, host, db  string
		port                  int
		query, address, shown string
	}{
		{"mysql+pymysql://magnum:magnum_dbpass@127.0.0.1/magnum?charset=utf8", MySQL, "magnum", "magnum_dbpass", "127.0.0.1", "magnum", 0,
			"charset=utf8", "127.0.0.1:3306", "mysql://magnum:***@127.0.0.1:3306/magnum"},
		{"mysql://root@db.example.com:3307/magnum_new", MySQL, "root", "", "db.example.com", "magnum_new", 3307, "", "db.example.com:3307", "mysql://root@db.example.com:3307/magnum_new"},
		{"mysql+pymysql://magnum:p%40ss%3Aw%2Frd@/magnum?unix_socket=/run/mysqld/mysqld.sock", MySQL, "magnum", "p@ss:w/rd", "", "magnum", 0,
			"unix_socket=%2Frun%2Fmysqld%2Fmysqld.sock", "unix:/run/mysqld/mysqld.sock", "mysql://magnum:***@unix:/run/mysqld/mysqld.sock/magnum"},
		{"postgresql://magnum:pw@[::1]:5433/magnum", Postgres, "magnum", "pw", "::1", "magnum", 5433, "", "[::1]:5433", "postgres://magnum:***@[::1]:5433/magnum"},
		{"postgresql+psycopg2://postgres@/magnum?host=/var/run/postgresql", Postgres, "postgres", "", "", "magnum", 0,
			"host=%2Fvar%2Frun%2Fpostgresql", "unix:/var/run/postgresql", "postgres://postgres@unix:/var/run/postgresql/magnum"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseURL(c.in)
			require.NoError(t, err)
			assert.Equal(t, c.dialect, got.Dialect)
			assert.Equal(t, c.user, got.User)
			assert.Equal(t, c.pass, got.Password)
			assert.Equal(t, c.host, got.Host)
			assert.Equal(t, c.port, got.Port)
			assert.Equal(t, c.db, got.Database)
			assert.Equal(t, c.query, got.Query.Encode())
			assert.Equal(t, c.address, got.Address())
			assert.Equal(t, c.shown, got.String())
		})
	}
}

// Start-up errors say what is wrong and never show the password.
func TestOpenErrors(t *testing.T) {
	const secret = "Sup3rSecretPw"
	cases := []struct{ name, url, mention string }{
		{"empty", "", "empty"},
		{"not a URL", "magnum database please", "is not dialect[+driver]://"},
		{"unsupported dialect", "sqlite:///var/lib/magnum/magnum.db", `dialect "sqlite" is not supported`},
		{"bad port", "mysql+pymysql://magnum:" + secret + "@127.0.0.1:33o6/magnum", `port "33o6"`},
		{"no database", "mysql+pymysql://magnum:" + secret + "@127.0.0.1:3306/", "names no database"},
		{"unknown mysql option", "mysql+pymysql://magnum:" + secret + "@127.0.0.1/magnum?frobnicate=1", `query option "frobnicate"`},
		{"unknown postgres option", "postgresql://magnum:" + secret + "@127.0.0.1/magnum?frobnicate=1", `query option "frobnicate"`},
		{"missing ssl_ca file", "mysql+pymysql://magnum:" + secret + "@127.0.0.1/magnum?ssl_ca=/nonexistent/ca.pem", "ssl_ca"},
		{"mysql unreachable", "mysql+pymysql://magnum:" + secret + "@127.0.0.1:1/magnum", `cannot connect to mysql database "magnum" at 127.0.0.1:1`},
		{"postgres unreachable", "postgresql://magnum:" + secret + "@127.0.0.1:1/magnum", `cannot connect to postgres database "magnum" at 127.0.0.1:1`},
		{"mysql bad credentials", "mysql+pymysql://mcb_no_such_user:" + secret + "@127.0.0.1:3306/magnum", "Access denied"},
		{"postgres unknown database", "postgresql://postgres@127.0.0.1:5432/mcb_no_such_database?sslmode=disable", `"mcb_no_such_database"`},
	}
	// These cases need the MariaDB or PostgreSQL on loopback to answer (integration tier).
	needsServer := map[string]bool{"mysql bad credentials": true, "postgres unknown database": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if needsServer[c.name] {
				testutil.Require(t, testutil.Integration)
			}
			_, err := Open(minuteFromNow(t), c.url)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.mention)
			assert.NotContains(t, err.Error(), secret)
		})
	}

	for _, b := range backends {
		t.Run("missing table on "+b.name, func(t *testing.T) {
			url := b.new(t)
			s := openTest(t, url)
			execAdmin(t, s, "DROP TABLE "+s.quote("nodegroup"))
			_, err := Open(minuteFromNow(t), url)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `table "nodegroup" is missing`)
			assert.Contains(t, err.Error(), "magnum-db-manage upgrade")
		})
		t.Run("missing column on "+b.name, func(t *testing.T) {
			url := b.new(t)
			s := openTest(t, url)
			execAdmin(t, s, "ALTER TABLE "+s.quote("cluster")+" DROP COLUMN "+s.quote("etcd_ca_cert_ref"))
			_, err := Open(minuteFromNow(t), url)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `table "cluster" lacks column(s) etcd_ca_cert_ref`)
		})
	}
}

// minuteFromNow bounds one Open: each case has its own minute, counted after its database was made
// (a copy of the template takes long on a loaded machine), so that no case uses up the next one's.
func minuteFromNow(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestOptionsFromConfig(t *testing.T) {
	f, err := config.Parse(`[database]
connection = mysql+pymysql://magnum:pw@127.0.0.1/magnum?charset=utf8
max_pool_size = 3
max_overflow = 7
connection_recycle_time = 600
max_retries = -1
retry_interval = 2
db_max_retries = 4
`)
	require.NoError(t, err)
	o, err := OptionsFromConfig(f)
	require.NoError(t, err)
	assert.Equal(t, "mysql+pymysql://magnum:pw@127.0.0.1/magnum?charset=utf8", o.Connection)
	assert.Equal(t, 3, o.MaxIdleConns)
	assert.Equal(t, 10, o.MaxOpenConns)
	assert.Equal(t, 10*time.Minute, o.ConnMaxLifetime)
	assert.Equal(t, -1, o.ConnectRetries)
	assert.Equal(t, 2*time.Second, o.ConnectRetryInterval)
	assert.Equal(t, 4, o.Retries)
	assert.Equal(t, time.Second, o.RetryInterval)

	for text, mention := range map[string]string{
		"[database]\n": "[database] connection: is not set",
		"[database]\nconnection = oracle://x@y/z\n":                    `[database] connection: database connection URL "oracle://x@y/z": dialect "oracle"`,
		"[database]\nconnection = mysql://u:hidden@h/\n":               "[database] connection: database connection URL \"mysql://u:***@h/\" names no database",
		"[database]\nconnection = mysql://h/d\nmax_pool_size = many\n": "[database] max_pool_size",
	} {
		f, err := config.Parse(text)
		require.NoError(t, err)
		_, err = OptionsFromConfig(f)
		require.Error(t, err, text)
		assert.Contains(t, err.Error(), mention)
		assert.NotContains(t, err.Error(), "hidden")
	}
}

func TestSchemaDetection(t *testing.T) {
	for _, rel := range []dbtest.Release{dbtest.Zed, dbtest.Release2024, dbtest.Release23} {
		t.Run(rel.String(), func(t *testing.T) {
			eachBackend(t, rel, func(t *testing.T, s *Store) {
				sch := s.Schema()
				assert.Equal(t, rel != dbtest.Release23, sch.TrustColumns)
				assert.Equal(t, rel == dbtest.Release23, sch.NodeGroupLabelsTaints)
				assert.Equal(t, rel != dbtest.Zed, sch.ClusterTemplateDriver)
				want := map[dbtest.Release]string{dbtest.Zed: "7da8489d6a68", dbtest.Release2024: "c0f832afc4fd", dbtest.Release23: "b3e1cf4a2d5e"}[rel]
				assert.Equal(t, want, sch.AlembicVersion)
				assert.True(t, strings.HasPrefix(sch.Release(), "Magnum "))
			})
		})
	}
}

// The unix-socket forms of the URL reach the same servers.
func TestOpenUnixSocket(t *testing.T) {
	sockets := map[string]string{"mariadb": "/run/mysqld/mysqld.sock", "postgres": "/var/run/postgresql/.s.PGSQL.5432"}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if _, err := os.Stat(sockets[b.name]); err != nil {
				t.Skipf("no %s socket at %s on this machine: %v", b.name, sockets[b.name], err)
			}
			tcp, err := ParseURL(b.new(t))
			require.NoError(t, err)
			u := "mysql+pymysql://" + tcp.User + "@/" + tcp.Database + "?unix_socket=" + sockets[b.name] + "&charset=utf8"
			if b.name == "postgres" {
				u = "postgresql+psycopg2://" + tcp.User + "@/" + tcp.Database + "?host=/var/run/postgresql"
			}
			s, err := Open(context.Background(), u)
			require.NoError(t, err)
			defer s.Close()
			assert.True(t, strings.HasPrefix(s.Target().Address(), "unix:/"))
			_, err = s.ReportServiceUp(context.Background(), "socket-host", "magnum-conductor")
			require.NoError(t, err)
		})
	}
}
