package capi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func configMap(ns, name, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"v": value}}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestApplyUnchangedSkipsWhatItAppliedAsIs: the second apply of the same content sends nothing; a
// changed object, another namespace's, and everything in a namespace where an apply failed are
// sent again.
func TestApplyUnchangedSkipsWhatItAppliedAsIs(t *testing.T) {
	var mu sync.Mutex
	var patches []string
	failing := ""
	c := &Client{Client: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(_ context.Context, _ client.WithWatch, ac runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			obj := ac.(client.Object) // ApplyConfigurationFromUnstructured: the Unstructured inside
			mu.Lock()
			defer mu.Unlock()
			patches = append(patches, obj.GetNamespace()+"/"+obj.GetName())
			if obj.GetName() == failing {
				return errors.New("the ClusterClass is gone")
			}
			return nil
		},
	}).Build()}
	ctx := context.Background()

	require.NoError(t, c.ApplyUnchanged(ctx, configMap("a", "class", "1"), configMap("a", "template", "1")))
	require.NoError(t, c.ApplyUnchanged(ctx, configMap("a", "class", "1"), configMap("a", "template", "1")))
	require.ElementsMatch(t, []string{"a/class", "a/template"}, patches, "the unchanged objects were sent again")

	require.NoError(t, c.ApplyUnchanged(ctx, configMap("a", "class", "2"), configMap("b", "class", "1")))
	require.ElementsMatch(t, []string{"a/class", "b/class"}, patches[2:])

	// A failed apply in a namespace (here the Cluster's, whose class someone deleted) forgets what
	// was applied there: the retry applies the class again.
	failing = "cluster"
	require.Error(t, c.Apply(ctx, configMap("a", "cluster", "1")))
	failing = ""
	patches = nil
	require.NoError(t, c.ApplyUnchanged(ctx, configMap("a", "class", "2"), configMap("b", "class", "1")))
	require.Equal(t, []string{"a/class"}, patches, "namespace a applied again, b not")
}

// TestApplyUnchangedTemplatesBeforeTheirClass: the templates go at once, the ClusterClass naming
// them only once they are all applied.
func TestApplyUnchangedTemplatesBeforeTheirClass(t *testing.T) {
	var mu sync.Mutex
	var order []string
	inFlight, maxInFlight := 0, 0
	c := &Client{Client: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(_ context.Context, _ client.WithWatch, ac runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			obj := ac.(client.Object) // ApplyConfigurationFromUnstructured: the Unstructured inside
			mu.Lock()
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			order = append(order, obj.GetObjectKind().GroupVersionKind().Kind)
			return nil
		},
	}).Build()}
	class := configMap("a", "class", "1")
	class.SetKind("ClusterClass")
	class.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	objs := []*unstructured.Unstructured{class}
	for _, name := range []string{"control-plane", "infrastructure", "workers", "bootstrap"} {
		objs = append(objs, configMap("a", name, "1"))
	}
	require.NoError(t, c.ApplyUnchanged(context.Background(), objs...))
	require.Equal(t, []string{"ConfigMap", "ConfigMap", "ConfigMap", "ConfigMap", "ClusterClass"}, order)
	require.Greater(t, maxInFlight, 1, "the templates were applied one at a time")
}

func TestAppliedCacheExpires(t *testing.T) {
	var a appliedCache
	now := time.Now()
	sum := [32]byte{1}
	a.remember("ns", "k", sum, now)
	require.True(t, a.fresh("ns", "k", sum, now.Add(appliedTTL-time.Second)))
	require.False(t, a.fresh("ns", "k", sum, now.Add(appliedTTL)), "after the TTL the object is applied again")
	require.False(t, a.fresh("ns", "k", [32]byte{2}, now), "other content")
	a.forget("ns")
	require.False(t, a.fresh("ns", "k", sum, now))
}
