package keystone

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeKeystone is a Keystone double for the one answer the real Keystone gives only now and then
// (under concurrent creates, it could not be provoked on demand on the local stack): 400 "Cannot
// create an application credential with unassigned role" for a user whose token lists the role.
// It validates any token as demo/member and serves the application-credential calls of
// CreateClusterCredentials; the first refuseCreates creates of each credential name get that
// refusal (the cluster's two credentials are created at once).
type fakeKeystone struct {
	*httptest.Server
	mu            sync.Mutex
	refuseCreates int
	refusal       keystoneRefusal
	createdAt     map[string][]time.Time // by credential name
	// appCredToken: the token validates as an application credential's.
	appCredToken bool
}

// keystoneRefusal is an error answer of Keystone's to an application-credential create.
type keystoneRefusal struct {
	status  int
	message string
}

var (
	unassignedRole = keystoneRefusal{http.StatusBadRequest,
		"Invalid application credential: Cannot create an application credential with unassigned role"}
	applicationCredentialMethod = keystoneRefusal{http.StatusForbidden,
		"You are not authorized to perform the requested action: Using method 'application_credential' is not allowed for managing additional application credentials."}
)

func newFakeKeystone(t *testing.T, refuseCreates int) *fakeKeystone {
	return newFakeKeystoneRefusing(t, refuseCreates, unassignedRole, false)
}

func newFakeKeystoneRefusing(t *testing.T, refuseCreates int, refusal keystoneRefusal, appCredToken bool) *fakeKeystone {
	f := &fakeKeystone{refuseCreates: refuseCreates, refusal: refusal, appCredToken: appCredToken, createdAt: map[string][]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v3/auth/tokens", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Subject-Token", "fake-token")
		methods := []string{"password"}
		var appCred any
		if f.appCredToken {
			methods, appCred = []string{"application_credential"}, map[string]any{"id": "app-cred-id", "restricted": true}
		}
		writeJSON(w, http.StatusOK, map[string]any{"token": map[string]any{
			"application_credential": appCred,
			"methods":                methods, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"user":    map[string]any{"id": "demo-id", "name": "demo", "domain": map[string]any{"id": "default"}},
			"project": map[string]any{"id": "project-id", "name": "demo", "domain": map[string]any{"id": "default"}},
			"roles":   []map[string]any{{"id": "member-id", "name": "member"}, {"id": "reader-id", "name": "reader"}},
			"catalog": []any{},
		}})
	})
	mux.HandleFunc("GET /v3/users/demo-id/application_credentials", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"application_credentials": []any{}, "links": map[string]any{}})
	})
	mux.HandleFunc("POST /v3/users/demo-id/application_credentials", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ApplicationCredential struct {
				Name string `json:"name"`
			} `json:"application_credential"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		name := body.ApplicationCredential.Name
		f.mu.Lock()
		f.createdAt[name] = append(f.createdAt[name], time.Now())
		refuse := len(f.createdAt[name]) <= f.refuseCreates
		f.mu.Unlock()
		if refuse {
			writeJSON(w, f.refusal.status, map[string]any{"error": map[string]any{"code": f.refusal.status,
				"title": http.StatusText(f.refusal.status), "message": f.refusal.message}})
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"application_credential": map[string]any{
			"id": "id-" + name, "name": name, "project_id": "project-id", "secret": "secret-of-" + name,
			"roles": []map[string]any{{"id": "member-id", "name": "member"}}, "unrestricted": false,
		}})
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeKeystone) client(t *testing.T, p RetryPolicy) *Client {
	c, err := NewClient(context.Background(), f.URL+"/v3", NewSecret("fake-token"), WithRetryPolicy(p))
	require.NoError(t, err)
	require.True(t, c.Identity().HasRole("member"))
	return c
}

// createTimes are the creates of one credential name, or of all with "".
func (f *fakeKeystone) createTimes(name string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "" {
		return append([]time.Time(nil), f.createdAt[name]...)
	}
	var all []time.Time
	for _, t := range f.createdAt {
		all = append(all, t...)
	}
	return all
}

const retryClusterUUID = "6f1c2b1e-3c1d-4b0a-9a57-0c7c0f6f1e2d"

// Keystone denying, for a while, a role the token holds does not fail the create: it is retried
// with growing waits and both credentials come out.
func TestCreateRetriesKeystoneDenyingAHeldRole(t *testing.T) {
	f := newFakeKeystone(t, 3)
	c := f.client(t, RetryPolicy{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond, Budget: 5 * time.Second})

	creds, err := c.CreateClusterCredentials(context.Background(), retryClusterUUID, CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, CredentialName(retryClusterUUID, PurposeCAPO, 0), creds.CAPO.Name)
	require.Equal(t, CredentialName(retryClusterUUID, PurposeWorkload, 0), creds.Workload.Name)

	require.Len(t, f.createTimes(CredentialName(retryClusterUUID, PurposeWorkload, 0)), 4, "the workload credential: three refused, then made")
	times := f.createTimes(CredentialName(retryClusterUUID, PurposeCAPO, 0))
	require.Len(t, times, 4, "the CAPO credential: three refused, then made")
	gaps := []time.Duration{times[1].Sub(times[0]), times[2].Sub(times[1]), times[3].Sub(times[2])}
	require.GreaterOrEqual(t, gaps[0], 20*time.Millisecond)
	require.GreaterOrEqual(t, gaps[1], 40*time.Millisecond, "the wait doubles")
	require.GreaterOrEqual(t, gaps[2], 50*time.Millisecond, "up to Max")
}

// A refusal that does not pass ends the create within the budget, or within the context's deadline
// when that comes first, with Keystone's answer (classified) and how long it persisted.
func TestCreateGivesUpOnPersistentRoleDenialWithinItsDeadline(t *testing.T) {
	f := newFakeKeystone(t, 1<<30)
	policy := RetryPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, Budget: 400 * time.Millisecond}

	start := time.Now()
	_, err := f.client(t, policy).CreateClusterCredentials(context.Background(), retryClusterUUID, CreateOptions{})
	elapsed := time.Since(start)
	require.ErrorIs(t, err, ErrUnassignedRole)
	require.Contains(t, err.Error(), "Cannot create an application credential with unassigned role")
	require.Regexp(t, `answered \d+ times over`, err.Error())
	require.Less(t, elapsed, 400*time.Millisecond+200*time.Millisecond, "the budget bounds the retries")
	require.Greater(t, len(f.createTimes(CredentialName(retryClusterUUID, PurposeCAPO, 0))), 3)

	deadline := 150 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start = time.Now()
	_, err = f.client(t, RetryPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, Budget: time.Minute}).
		CreateClusterCredentials(ctx, retryClusterUUID, CreateOptions{})
	require.True(t, errors.Is(err, ErrUnassignedRole) || errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Less(t, time.Since(start), deadline+100*time.Millisecond, "the context's deadline bounds the retries")
}

// Keystone taking a password token for an application credential's (seen under concurrent creates)
// is retried too; the same answer for a token that is an application credential's is final.
func TestCreateRetriesKeystoneMisreadingTheTokenMethod(t *testing.T) {
	policy := RetryPolicy{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, Budget: 5 * time.Second}
	f := newFakeKeystoneRefusing(t, 2, applicationCredentialMethod, false)
	_, err := f.client(t, policy).CreateClusterCredentials(context.Background(), retryClusterUUID, CreateOptions{})
	require.NoError(t, err)
	require.Len(t, f.createTimes(""), 6, "two refused creates of each, then both credentials")

	f = newFakeKeystoneRefusing(t, 2, applicationCredentialMethod, true)
	_, err = f.client(t, policy).CreateClusterCredentials(context.Background(), retryClusterUUID, CreateOptions{})
	require.ErrorIs(t, err, ErrApplicationCredentialMethod)
	require.ErrorIs(t, err, ErrForbidden)
	require.Len(t, f.createTimes(CredentialName(retryClusterUUID, PurposeCAPO, 0)), 1, "an application credential's token really may not: no retry")
	require.LessOrEqual(t, len(f.createTimes("")), 2, "nor of the other credential")
}

// Only that answer is retried: any other 400 is final at once.
func TestUnassignedRoleClassification(t *testing.T) {
	denied := newError("create application credential", "n", keystoneResponse(400,
		`{"error":{"code":400,"message":"Invalid application credential: Cannot create an application credential with unassigned role","title":"Bad Request"}}`))
	other := newError("create application credential", "n", keystoneResponse(400, `{"error":{"message":"Invalid input for field 'name'"}}`))
	require.ErrorIs(t, denied, ErrUnassignedRole)
	require.ErrorIs(t, errors.Join(errors.New("x"), denied), ErrUnassignedRole)
	require.NotErrorIs(t, other, ErrUnassignedRole)
	require.NotErrorIs(t, newError("create", "n", keystoneResponse(403, `{"error":{"message":"Cannot create an application credential with unassigned role"}}`)), ErrUnassignedRole)
}
