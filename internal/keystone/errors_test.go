package keystone

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

func keystoneResponse(status int, body string) error {
	return gophercloud.ErrUnexpectedResponseCode{Method: "DELETE", URL: "http://keystone/v3/x", Actual: status, Body: []byte(body)}
}

func TestErrorClassification(t *testing.T) {
	notFound := newError("delete application credential", "n (id 1)", keystoneResponse(404,
		`{"error":{"code":404,"message":"Could not find Application Credential: 1.","title":"Not Found"}}`))
	forbidden := newError("delete application credential", "n (id 2)", keystoneResponse(403, `{"error":{"message":"nope"}}`))
	unauthorized := newError("authenticate", "", keystoneResponse(401, `{"error":{"message":"The request you have made requires authentication."}}`))

	if !errors.Is(notFound, ErrNotFound) || errors.Is(notFound, ErrForbidden) {
		t.Fatalf("404 misclassified: %v", notFound)
	}
	if !errors.Is(forbidden, ErrForbidden) || errors.Is(forbidden, ErrNotFound) {
		t.Fatalf("403 misclassified: %v", forbidden)
	}
	if !errors.Is(unauthorized, ErrUnauthorized) {
		t.Fatalf("401 misclassified: %v", unauthorized)
	}
	if want := "keystone: delete application credential n (id 1): 404 Not Found: Could not find Application Credential: 1."; notFound.Error() != want {
		t.Fatalf("message:\n got %q\nwant %q", notFound.Error(), want)
	}
	if !gophercloud.ResponseCodeIs(notFound, http.StatusNotFound) {
		t.Fatal("the gophercloud error should stay reachable through Unwrap")
	}

	if !OnlyNotFound(notFound) || !OnlyNotFound(errors.Join(notFound, notFound)) {
		t.Fatal("OnlyNotFound should accept 404s, also joined")
	}
	joined := errors.Join(notFound, forbidden)
	if OnlyNotFound(joined) || !errors.Is(joined, ErrForbidden) || !errors.Is(joined, ErrNotFound) {
		t.Fatalf("a mixed failure must not read as already-gone: %v", joined)
	}
	if OnlyNotFound(nil) || OnlyNotFound(errors.New("boom")) || OnlyNotFound(errors.Join(errors.Join(), nil)) {
		t.Fatal("OnlyNotFound accepted something that is not a 404")
	}
	if !OnlyNotFound(fmt.Errorf("context: %w", errors.Join(notFound, errors.Join(notFound)))) {
		t.Fatal("OnlyNotFound should look through wrapping")
	}
}

// Keystone's validation messages can quote request values; whatever secret took part in the
// request must not survive into the error, and non-JSON bodies are cut short.
func TestErrorScrubsEchoedSecrets(t *testing.T) {
	err := newError("authenticate", "", keystoneResponse(400,
		fmt.Sprintf(`{"error":{"message":"Invalid input for field 'secret': '%s' is too long"}}`, sampleSecret)), sampleSecret)
	if strings.Contains(err.Error(), sampleSecret) || !strings.Contains(err.Error(), redacted) {
		t.Fatalf("secret not scrubbed: %v", err)
	}
	long := newError("list", "", keystoneResponse(502, strings.Repeat("x", 1000)+"\nsecond line"))
	if len(long.Error()) > 300 || strings.Contains(long.Error(), "second line") {
		t.Fatalf("a long text body should be cut short: %q", long.Error())
	}
	page := newError("list", "", keystoneResponse(404, "<!doctype html>\n<html><head><TITLE>404 Not Found</TITLE></head><body>"+strings.Repeat("y", 1000)+"</body></html>"))
	if want := "keystone: list: 404 Not Found: non-JSON answer: 404 Not Found"; page.Error() != want {
		t.Fatalf("an HTML page should be summarised by its title:\n got %q\nwant %q", page.Error(), want)
	}
	untitled := newError("list", "", keystoneResponse(503, "<html><body>busy</body></html>"))
	if !strings.HasSuffix(untitled.Error(), "non-JSON answer (30 bytes of HTML)") {
		t.Fatalf("untitled HTML: %q", untitled.Error())
	}
}

func TestCredentialNames(t *testing.T) {
	const id = "6f1c2b1e-3c1d-4b0a-9a57-0c7c0f6f1e2d"
	for _, p := range purposes {
		for _, gen := range []int{0, 1, 2, 17} {
			name := CredentialName(id, p, gen)
			gotP, gotGen, ok := parseCredentialName(id, name)
			if !ok || gotP != p || gotGen != gen {
				t.Fatalf("%s parsed as %q %d %v", name, gotP, gotGen, ok)
			}
		}
	}
	if CredentialName(id, PurposeCAPO, 0) != "magnum-"+id+"-capo" || CredentialName(id, PurposeWorkload, 3) != "magnum-"+id+"-workload-r3" {
		t.Fatal("name format changed; stored clusters depend on it")
	}
	for _, name := range []string{
		"magnum-" + id + "-capox", "magnum-" + id + "-capo-r0", "magnum-" + id + "-capo-r01", "magnum-" + id + "-capo-r",
		"magnum-" + id + "-capo-rx", "magnum-" + id + "-1a2b3c4d", // magnum-capi-helm's naming is not ours
		"magnum-6f1c2b1e-3c1d-4b0a-9a57-0c7c0f6f1e2e-capo", "other",
	} {
		if _, _, ok := parseCredentialName(id, name); ok {
			t.Errorf("%s should not be taken for one of this cluster's credentials", name)
		}
	}
	for _, bad := range []string{"", "6F1C2B1E-3C1D-4B0A-9A57-0C7C0F6F1E2D", "6f1c2b1e3c1d4b0a9a570c7c0f6f1e2d", "urn:uuid:" + id, "{" + id + "}", "x"} {
		if checkClusterUUID(bad) == nil {
			t.Errorf("cluster uuid %q accepted", bad)
		}
	}
}

// Refused before any request: roles the caller does not hold (Keystone would answer 400 with a
// vaguer message), expiry in the past, bad cluster uuids.
func TestCreateValidatesBeforeCallingKeystone(t *testing.T) {
	c := &Client{who: Identity{UserID: "u", ProjectID: "p", Roles: []string{"reader", "member"}}}
	const id = "6f1c2b1e-3c1d-4b0a-9a57-0c7c0f6f1e2d"
	past := time.Now().Add(-time.Minute)
	cases := map[string]struct {
		uuid string
		opts CreateOptions
		want string
	}{
		"admin role not held": {id, CreateOptions{Roles: []string{"admin"}}, `no role "admin"`},
		"workload role":       {id, CreateOptions{WorkloadRoles: []string{"load-balancer_member"}}, `no role "load-balancer_member"`},
		"expired":             {id, CreateOptions{ExpiresAt: &past}, "not in the future"},
		"bad uuid":            {"not-a-uuid", CreateOptions{}, "canonical"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.CreateClusterCredentials(context.Background(), tc.uuid, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := c.checkCreate(id, CreateOptions{Roles: []string{"MEMBER"}}); err != nil {
		t.Fatalf("role names are case-insensitive in Keystone: %v", err)
	}
}

// Bad addresses and a Keystone that never answers end in errors, not panics or hangs.
func TestClientConstructionFailsCleanly(t *testing.T) {
	ctx := context.Background()
	token := NewSecret(sampleSecret)
	for _, url := range []string{"", "keystone:5000/v3", "/v3", "ftp://h/v3"} {
		if _, err := NewClient(ctx, url, token); err == nil || strings.Contains(err.Error(), sampleSecret) {
			t.Errorf("URL %q: %v", url, err)
		}
	}
	if _, err := NewClient(ctx, "http://127.0.0.1:5000/v3", Secret{}); err == nil {
		t.Error("empty token accepted")
	}
	if _, err := NewApplicationCredentialClient(ctx, "http://127.0.0.1:5000/v3", "id", Secret{}); err == nil {
		t.Error("empty application credential secret accepted")
	}
	if _, err := NewPasswordClient(ctx, PasswordAuth{AuthURL: "http://127.0.0.1:5000/v3", Username: "u", Password: token}); err == nil ||
		!strings.Contains(err.Error(), "project") {
		t.Errorf("unscoped password auth: %v", err)
	}

	// A listener that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = NewClient(ctx, "http://"+ln.Addr().String()+"/v3", token)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("a silent Keystone should end in the context deadline, got %v after %s", err, time.Since(start))
	}
	if strings.Contains(err.Error(), sampleSecret) {
		t.Fatalf("error leaks the token: %v", err)
	}
}

func TestServiceAuthFromConfig(t *testing.T) {
	// The magnum.conf of the real magnum-api 15.0.1 stack.
	f, err := config.Load(filepath.Join(testutil.SharedDir(t), "reference", "magnum-stack-etc", "magnum", "magnum.conf"))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ServiceAuthFromConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if auth.AuthURL != "http://127.0.0.1:5000/v3" || auth.Username != "magnum" || auth.ProjectName != "service" ||
		auth.UserDomainName != "Default" || auth.ProjectDomainName != "Default" || auth.Password.IsZero() {
		t.Fatalf("unexpected service auth: %+v", auth)
	}
	if strings.Contains(fmt.Sprintf("%+v %#v", auth, auth), auth.Password.Reveal()) {
		t.Fatal("printing PasswordAuth leaks the password")
	}

	// Fallback to [keystone_authtoken], defaults for the domains, and clear errors.
	f, _ = config.Parse("[keystone_authtoken]\nauth_url = https://k/v3\nusername = magnum\npassword = pw\nproject_name = service\n")
	auth, err = ServiceAuthFromConfig(f)
	if err != nil || auth.AuthURL != "https://k/v3" || auth.UserDomainID != "default" || auth.ProjectDomainID != "default" {
		t.Fatalf("fallback: %+v %v", auth, err)
	}
	for text, key := range map[string]string{
		"[keystone_auth]\nauth_url = https://k/v3\nusername = m\nproject_name = s\n":                                   "[keystone_auth] password",
		"[keystone_auth]\nauth_url = https://k/v3\nusername = m\npassword = p\n":                                       "[keystone_auth] project_name",
		"[keystone_auth]\nusername = m\npassword = p\nproject_name = s\n":                                              "[keystone_auth] auth_url",
		"[keystone_auth]\nauth_type = v3applicationcredential\nauth_url = https://k/v3\n":                              "[keystone_auth] auth_type",
		"[keystone_auth]\nauth_url = https://k/v3\nusername = m\npassword = p\nproject_name = s\ninsecure = perhaps\n": "[keystone_auth] insecure",
	} {
		f, _ := config.Parse(text)
		if _, err := ServiceAuthFromConfig(f); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("config %q: got %v, want an error naming %s", text, err, key)
		}
	}
}

// The CA file's problems read as they always have: the operator finds the option by its words.
func TestHTTPClientCAFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.pem")
	_, err := HTTPClient(missing, false)
	require.ErrorContains(t, err, "keystone: read CA file: open "+missing)
	require.ErrorIs(t, err, fs.ErrNotExist)

	junk := filepath.Join(t.TempDir(), "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("junk"), 0o600))
	_, err = HTTPClient(junk, false)
	require.EqualError(t, err, "keystone: CA file "+junk+" holds no PEM certificate")

	hc, err := HTTPClient("", true)
	require.NoError(t, err)
	require.True(t, hc.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify)
	require.Equal(t, DefaultRequestTimeout, hc.Timeout)
}
