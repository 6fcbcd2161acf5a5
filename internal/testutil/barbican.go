package testutil

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Barbican is the local stack's Barbican (deploy/local/openstack/barbican.sh) and the identity
// Magnum's conductor reaches it with: its service user from magnum.conf's [keystone_auth]. Every
// value can be overridden from the environment (MCB_KEYSTONE_URL, MCB_BARBICAN_URL, MCB_REGION,
// MAGNUM_SERVICE_PASSWORD).
type Barbican struct {
	KeystoneURL, Region string
	// URL is Barbican's catalog URL, without /v1.
	URL string
	// Username and Password are Magnum's service user; it and its project (ProjectName) are in
	// the Default domain.
	Username, Password, ProjectName string
}

const barbicanHint = "deploy/local/openstack/barbican.sh (part of `make up`) runs it"

// RequireBarbican is for the integration tests of the Barbican certificate store: the integration
// tier, and a Keystone and a Barbican that answer. Unlike the tier's other services these are part
// of the OpenStack half of the local stack, not of deploy/local/services.sh, so the test is skipped,
// saying which is missing, when they do not answer.
//
// The tests share one project (the service user's) and some compare what it holds before and after:
// the test holds a lock, across test binaries, until it ends. Call it once per test.
func RequireBarbican(t testing.TB) Barbican {
	t.Helper()
	Require(t, Integration)
	b := Barbican{
		KeystoneURL: Env("MCB_KEYSTONE_URL", "http://127.0.0.1:5000/v3"),
		Region:      Env("MCB_REGION", "RegionOne"),
		URL:         Env("MCB_BARBICAN_URL", "http://127.0.0.1:9311"),
		Username:    "magnum",
		Password:    Env("MAGNUM_SERVICE_PASSWORD", "secretmagnum"),
		ProjectName: "service",
	}
	for _, s := range []struct{ name, url string }{{"Keystone", b.KeystoneURL}, {"Barbican", b.URL + "/"}} {
		if err := answers(s.url); err != nil {
			t.Skipf("integration tier: %s does not answer at %s (%v); %s", s.name, s.url, err, barbicanHint)
		}
	}
	HoldBarbican(t)
	return b
}

// HoldBarbican holds the local Barbican's service project alone until the test ends, across test
// binaries: the integration tests compare what it holds before and after, and the e2e test of a
// Barbican-backed bridge stops Barbican for a while.
func HoldBarbican(t testing.TB) {
	t.Helper()
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mcb-barbican-tests.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("Barbican test lock: %v", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("Barbican test lock: %v", err)
	}
	t.Cleanup(func() { lock.Close() }) // closing releases the lock
}

// answers is an HTTP GET that gets any status below 500.
func answers(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
