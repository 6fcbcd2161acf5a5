package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// recordingServerGroups records how the groups were made; asCaller is closed at the first
// EnsureAsCaller.
type recordingServerGroups struct {
	mu           sync.Mutex
	calls        []string
	asCaller     chan struct{}
	asCallerOnce sync.Once
}

func (r *recordingServerGroups) record(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *recordingServerGroups) Ensure(context.Context, []byte, []byte, []templates.ServerGroup) error {
	r.record("as the credential")
	return nil
}

func (r *recordingServerGroups) EnsureAsCaller(_ context.Context, caller *rpc.Context, projectID string, groups []templates.ServerGroup) error {
	r.record("as " + caller.UserID + " in " + projectID)
	r.asCallerOnce.Do(func() { close(r.asCaller) })
	return nil
}

func (r *recordingServerGroups) Delete(context.Context, []byte, []byte, []string) error { return nil }

// credentialsWaitingForServerGroups issues only once the server groups are being made: a create
// that made them after the credentials, one after the other, would wait here in vain.
type credentialsWaitingForServerGroups struct {
	fakeCredentials
	groups *recordingServerGroups
}

func (c *credentialsWaitingForServerGroups) Issue(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster) (*IssuedCredentials, error) {
	select {
	case <-c.groups.asCaller:
		return c.issue(), nil
	case <-time.After(5 * time.Second):
		return nil, errors.New("the server groups were not being made while the credentials were")
	}
}

// A create with the request's token makes the OpenStack cluster's server groups as that user while
// its credentials are made, not after them as the credential.
func TestCreateMakesServerGroupsWhileTheCredentialsAreMade(t *testing.T) {
	h := newHarness(t)
	h.c.opts.Flavor = templates.FlavorOpenStack
	groups := &recordingServerGroups{asCaller: make(chan struct{})}
	h.c.opts.ServerGroups = groups
	h.c.opts.Credentials = &credentialsWaitingForServerGroups{fakeCredentials: fakeCredentials{kube: h.kube}, groups: groups}
	tmpl := h.store.templates[templateV136]
	tmpl.KeypairID.Set("default")
	tmpl.ExternalNetworkID.Set("public")
	tmpl.Labels.Set(magnum.NewDict("server_group_policies", "anti-affinity"))

	req, id := h.createRequest("demo", 1)
	req.Context.AuthTokenInfo = json.RawMessage(`{"token": {}}`)
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(5))
	cl := h.store.cluster(t, id)
	require.Equal(t, magnum.StatusCreateInProgress, cl.Status.Or(""), cl.StatusReason.Or(""))
	require.NotEmpty(t, groups.calls)
	for _, call := range groups.calls {
		require.Equal(t, "as demo-user in "+demoProject, call)
	}
}
