package capi

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// allRequests counts every request the client sends.
type allRequests struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (a *allRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	a.n.Add(1)
	return a.next.RoundTrip(r)
}

// TestWarmLeavesTheFirstCreateNoLookups: after Warm, resolving the kinds a create writes and the
// bridge's identity asks nothing of the apiserver (they were the first create's discovery
// requests and its SelfSubjectReview).
func TestWarmLeavesTheFirstCreateNoLookups(t *testing.T) {
	cfg, err := RESTConfig(managementCluster(t))
	require.NoError(t, err)
	counter := &allRequests{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	mgr, err := NewManager(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The local management cluster serves the in-memory provider and CAPO: every kind resolves.
	require.NoError(t, mgr.Client.Warm(ctx))
	require.NotZero(t, counter.n.Load(), "warming asked the apiserver")

	before := counter.n.Load()
	for _, gvk := range warmKinds {
		_, err := mgr.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s", gvk)
	}
	_, err = mgr.Client.self.subject(ctx, mgr.Client.Client)
	require.NoError(t, err)
	require.Equal(t, before, counter.n.Load(), "after Warm, no lookup of a create's goes to the apiserver")
}
