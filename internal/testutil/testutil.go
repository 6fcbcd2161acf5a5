// Package testutil finds what tests share: the reference fixtures next to the checkout and the
// addresses of the real services (RabbitMQ, MariaDB, PostgreSQL) the tests talk to. Defaults are the
// services a development or CI machine runs on loopback; environment variables override them.
//
// Tests come in three tiers (docs/testing.md):
//
//   - unit: no outside service at all; `go test ./...` runs only these, on any machine with Go.
//   - integration (build tag `integration`): the real RabbitMQ, MariaDB or PostgreSQL on loopback,
//     as deploy/local/services.sh starts them; `go test -tags integration ./...`.
//   - e2e (build tag `e2e`): the whole local stack of `make up` (the management cluster with Cluster
//     API, Keystone, magnum-api, the bridge, fake-openstack, Horizon);
//     `go test -tags integration,e2e ./...`.
//
// A test of a tier calls Require(t, Integration) or Require(t, E2E) first, which skips it (saying
// why and how to run it) when the tier's tag is not set; with the tag set, a service that is missing
// fails the test. The accessors of the services do it for their callers: rpctest (the broker),
// dbtest (the databases) and ManagementCluster.
package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// RepoRoot is the directory holding the module's go.mod: the nearest above the working directory
// (go test runs a package's tests in its directory), else the one above this source file. The
// working directory comes first because `make test` builds with -trimpath, which leaves source
// file names without their directory.
func RepoRoot() string {
	if dir, err := os.Getwd(); err == nil {
		if root, ok := moduleRoot(dir); ok {
			return root
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// moduleRoot is the nearest directory at or above dir whose go.mod declares this module (not a
// nested module such as test/caposim).
func moduleRoot(dir string) (string, bool) {
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(mod, []byte("module github.com/magnum-capi-bridge/magnum-capi-bridge\n")) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// SharedDir is the read-only reference folder (`shared/`), by default `../shared` from the
// repository root; MCB_SHARED_DIR overrides it.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MCB_SHARED_DIR")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "..", "shared")
	}
	if _, err := os.Stat(filepath.Join(dir, "fixtures")); err != nil {
		t.Fatalf("reference fixtures not found at %s (set MCB_SHARED_DIR): %v", dir, err)
	}
	return dir
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// AMQPURL is the RabbitMQ the tests use.
func AMQPURL() string { return env("MCB_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/") }

// MySQLDSN is a go-sql-driver DSN for a MariaDB account that may create databases.
func MySQLDSN() string { return env("MCB_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/") }

// PostgresURL is a URL for a PostgreSQL role that may create databases.
func PostgresURL() string {
	return env("MCB_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
}

// OpenStackCLIEnv is the environment for running the real `openstack` CLI against the local stack:
// the caller's environment without OS_* variables (so --os-cloud alone picks the cloud), with SHELL
// set when the caller has none. `openstack coe cluster config` reads $SHELL to choose the export
// syntax and fails with KeyError 'SHELL' without it — as it does under CI runners.
func OpenStackCLIEnv() []string {
	env := []string{}
	hasShell := false
	for _, kv := range os.Environ() {
		if len(kv) >= 3 && kv[:3] == "OS_" {
			continue
		}
		if len(kv) >= 6 && kv[:6] == "SHELL=" {
			hasShell = true
		}
		env = append(env, kv)
	}
	if !hasShell {
		env = append(env, "SHELL=/bin/sh")
	}
	return env
}
