package db

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tlsclient"
)

// Dialect is the database family of a connection URL.
type Dialect string

const (
	MySQL    Dialect = "mysql"    // MariaDB or MySQL, through go-sql-driver/mysql
	Postgres Dialect = "postgres" // PostgreSQL, through pgx
)

// Target is a parsed SQLAlchemy URL ([database] connection), e.g.
// mysql+pymysql://magnum:secret@127.0.0.1:3306/magnum?charset=utf8.
type Target struct {
	Dialect  Dialect
	Driver   string // the "+driver" part (pymysql, psycopg2, …), informational
	User     string
	Password string
	Host     string // empty: the driver's default (unix socket for PostgreSQL, localhost for MySQL)
	Port     int    // 0: default
	Database string
	Query    url.Values
}

// SQLAlchemy's URL grammar: dialect[+driver]://[user[:password]@][host[:port]]/[database][?query].
// The host may be an [IPv6] literal. User and password are %-encoded.
var sqlalchemyURL = regexp.MustCompile(`^([A-Za-z0-9_]+)(?:\+([A-Za-z0-9_]+))?://` +
	`(?:([^:/@]*)(?::([^@]*))?@)?` +
	`(\[[^\]]*\]|[^/:?]*)?(?::([^/?]*))?` +
	`(?:/([^?]*))?(?:\?(.*))?$`)

// ParseURL reads a SQLAlchemy URL. Errors never contain the password.
func ParseURL(raw string) (*Target, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, fmt.Errorf("database connection URL is empty")
	}
	m := sqlalchemyURL.FindStringSubmatch(raw)
	if m == nil {
		return nil, fmt.Errorf("database connection URL %q is not dialect[+driver]://user:password@host:port/database", redactURL(raw))
	}
	t := &Target{Driver: m[2], Host: strings.Trim(m[5], "[]")}
	switch strings.ToLower(m[1]) {
	case "mysql", "mariadb":
		t.Dialect = MySQL
	case "postgresql", "postgres", "pgsql":
		t.Dialect = Postgres
	default:
		return nil, fmt.Errorf("database connection URL %q: dialect %q is not supported (use mysql or postgresql)", redactURL(raw), m[1])
	}
	var err error
	if t.User, err = url.PathUnescape(m[3]); err != nil {
		return nil, fmt.Errorf("database connection URL %q: user name: %v", redactURL(raw), err)
	}
	if t.Password, err = url.PathUnescape(m[4]); err != nil {
		return nil, fmt.Errorf("database connection URL %q: the password is not valid %%-encoding", redactURL(raw))
	}
	if m[6] != "" {
		p, err := strconv.Atoi(m[6])
		if err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("database connection URL %q: port %q is not a number in 1..65535", redactURL(raw), m[6])
		}
		t.Port = p
	}
	if t.Database, err = url.PathUnescape(m[7]); err != nil {
		return nil, fmt.Errorf("database connection URL %q: database name: %v", redactURL(raw), err)
	}
	if t.Database == "" {
		return nil, fmt.Errorf("database connection URL %q names no database", redactURL(raw))
	}
	if t.Query, err = url.ParseQuery(m[8]); err != nil {
		return nil, fmt.Errorf("database connection URL %q: query: %v", redactURL(raw), err)
	}
	return t, nil
}

var passwordInURL = regexp.MustCompile(`(://[^:/@]*):[^@]*@`)

// redactURL hides the password of a URL for messages and logs.
func redactURL(s string) string { return passwordInURL.ReplaceAllString(s, "$1:***@") }

// String is the URL with the password hidden.
func (t *Target) String() string {
	var b strings.Builder
	b.WriteString(string(t.Dialect))
	b.WriteString("://")
	if t.User != "" {
		b.WriteString(url.PathEscape(t.User))
		if t.Password != "" {
			b.WriteString(":***")
		}
		b.WriteByte('@')
	}
	b.WriteString(t.Address())
	b.WriteByte('/')
	b.WriteString(t.Database)
	return b.String()
}

// Address is host:port (or the unix socket) for messages.
func (t *Target) Address() string {
	if s := t.socket(); s != "" {
		return "unix:" + s
	}
	host := t.Host
	if host == "" {
		host = "localhost"
	}
	port := t.Port
	if port == 0 {
		port = 3306
		if t.Dialect == Postgres {
			port = 5432
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func (t *Target) socket() string {
	if s := t.Query.Get("unix_socket"); s != "" { // pymysql
		return s
	}
	if t.Dialect == Postgres && strings.HasPrefix(t.Query.Get("host"), "/") { // libpq / psycopg2
		return t.Query.Get("host")
	}
	return ""
}

var tlsConfigSeq atomic.Int64

// mysqlDSN builds a go-sql-driver DSN. Beyond the URL it always sets what the store relies on:
// parseTime with UTC (DATETIME columns are naive UTC) and clientFoundRows, so that an UPDATE that
// matches a row reports it even when no value changed.
func (t *Target) mysqlDSN() (string, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = t.User, t.Password, t.Database
	if s := t.socket(); s != "" {
		cfg.Net, cfg.Addr = "unix", s
	} else {
		cfg.Net, cfg.Addr = "tcp", t.Address()
	}
	cfg.ParseTime, cfg.Loc, cfg.ClientFoundRows = true, time.UTC, true
	cfg.Timeout = 10 * time.Second
	cfg.Params = map[string]string{}
	charset := "utf8mb4"
	wantTLS := false
	for key, vals := range t.Query {
		v := vals[len(vals)-1]
		switch key {
		case "charset":
			charset = v
		case "unix_socket", "binary_prefix", "local_infile", "program_name", "init_command", "autocommit", "client_flag":
			// accepted by pymysql; nothing to do, or not applicable to this driver
		case "connect_timeout", "read_timeout", "write_timeout":
			secs, err := strconv.ParseFloat(v, 64)
			if err != nil || secs <= 0 {
				return "", fmt.Errorf("database connection URL %s: %s=%q is not a number of seconds", t, key, v)
			}
			d := time.Duration(secs * float64(time.Second))
			switch key {
			case "connect_timeout":
				cfg.Timeout = d
			case "read_timeout":
				cfg.ReadTimeout = d
			default:
				cfg.WriteTimeout = d
			}
		case "ssl_ca", "ssl_cert", "ssl_key", "ssl_check_hostname", "ssl_verify_cert", "ssl", "ssl_disabled":
			wantTLS = true
		default:
			return "", fmt.Errorf("database connection URL %s: query option %q is not supported for mysql", t, key)
		}
	}
	cfg.Params["charset"] = charset
	if wantTLS && !queryBool(t.Query, "ssl_disabled") {
		// As pymysql: ssl_ca replaces the system pool, and either check switched off skips
		// verification altogether.
		tlsCfg, err := tlsclient.Config(tlsclient.Options{
			ServerName: t.Host,
			CAFile:     t.Query.Get("ssl_ca"),
			CertFile:   t.Query.Get("ssl_cert"),
			KeyFile:    t.Query.Get("ssl_key"),
			Insecure: t.Query.Has("ssl_check_hostname") && !queryBool(t.Query, "ssl_check_hostname") ||
				t.Query.Has("ssl_verify_cert") && !queryBool(t.Query, "ssl_verify_cert"),
		})
		var te *tlsclient.Error
		switch {
		case errors.Is(err, tlsclient.ErrNoCertificate):
			return "", fmt.Errorf("database connection URL %s: ssl_ca %s holds no PEM certificate", t, t.Query.Get("ssl_ca"))
		case errors.As(err, &te) && te.Part == tlsclient.PartCA:
			return "", fmt.Errorf("database connection URL %s: ssl_ca: %v", t, te.Err)
		case errors.As(err, &te):
			return "", fmt.Errorf("database connection URL %s: ssl_cert/ssl_key: %v", t, te.Err)
		case err != nil:
			return "", fmt.Errorf("database connection URL %s: TLS: %v", t, err)
		}
		name := fmt.Sprintf("magnum-db-%d", tlsConfigSeq.Add(1))
		if err := mysql.RegisterTLSConfig(name, tlsCfg); err != nil {
			return "", fmt.Errorf("database connection URL %s: TLS: %v", t, err)
		}
		cfg.TLSConfig = name
	}
	return cfg.FormatDSN(), nil
}

func queryBool(q url.Values, key string) bool {
	switch strings.ToLower(q.Get(key)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// libpq connection parameters passed through to pgx; psycopg2 hands the URL's query to libpq the
// same way. Anything else would reach the server as a run-time parameter and fail there, so it is
// refused here with a clearer message.
var pgParams = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "sslmode": true, "sslrootcert": true, "sslcert": true,
	"sslkey": true, "sslpassword": true, "sslsni": true, "connect_timeout": true, "application_name": true,
	"target_session_attrs": true, "options": true, "client_encoding": true, "search_path": true,
	"krbsrvname": true, "service": true, "passfile": true, "keepalives": false, "keepalives_idle": false,
}

// pgDSN builds a pgx connection string.
func (t *Target) pgDSN() (string, error) {
	u := &url.URL{Scheme: "postgres", Path: "/" + t.Database}
	if t.User != "" {
		if t.Password != "" {
			u.User = url.UserPassword(t.User, t.Password)
		} else {
			u.User = url.User(t.User)
		}
	}
	if t.Host != "" {
		u.Host = t.Host
		if t.Port != 0 {
			u.Host = net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
		}
	}
	q := url.Values{}
	for key, vals := range t.Query {
		pass, known := pgParams[key]
		if !known {
			return "", fmt.Errorf("database connection URL %s: query option %q is not supported for postgresql", t, key)
		}
		if pass {
			q[key] = vals
		}
	}
	if t.Host == "" && t.Port != 0 && !q.Has("port") {
		q.Set("port", strconv.Itoa(t.Port))
	}
	if !q.Has("connect_timeout") {
		q.Set("connect_timeout", "10")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
