package testutil

import "testing"

// Tier is a group of tests that need the same outside services; a build tag selects it.
type Tier string

const (
	// Integration is the tests that need the real RabbitMQ, MariaDB or PostgreSQL on loopback (what
	// deploy/local/services.sh starts): build tag `integration`.
	Integration Tier = "integration"
	// E2E is the tests that need the whole local stack of `make up` (the management cluster's
	// kube-apiserver with Cluster API, Keystone, magnum-api, the bridge, fake-openstack, Horizon):
	// build tag `e2e`.
	E2E Tier = "e2e"
)

// Enabled reports whether the tier's build tag is set.
func (t Tier) Enabled() bool {
	switch t {
	case Integration:
		return integrationTag
	case E2E:
		return e2eTag
	}
	return false
}

// Needs is what the tier's tests need and how to run them, for skip messages.
func (t Tier) Needs() string {
	switch t {
	case Integration:
		return "integration tier: needs RabbitMQ, MariaDB and PostgreSQL on loopback (deploy/local/services.sh); " +
			"run with `go test -tags integration ./...`"
	case E2E:
		return "e2e tier: needs the local stack of `make up` (management cluster, Keystone, magnum-api, the bridge); " +
			"run with `go test -tags integration,e2e ./...` after `make up`"
	}
	return "unknown tier " + string(t)
}

// Require skips the test, saying why and how to run it, unless the tier's build tag is set. With the
// tag set it does nothing: a missing service then fails the test, as it should.
func Require(t testing.TB, tier Tier) {
	t.Helper()
	if !tier.Enabled() {
		t.Skip(tier.Needs())
	}
}
