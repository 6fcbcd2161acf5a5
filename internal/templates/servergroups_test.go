package templates_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
)

// Cleanup names are exactly the names a rendering with server groups on asks CAPO to use.
func TestServerGroupNamesMatchTheRendering(t *testing.T) {
	in := templatestest.BaseOpenStackInput()
	in.Cluster.Labels = map[string]string{"server_group_policies": "soft-anti-affinity"}
	in.NodeGroups = append(in.NodeGroups, templates.NodeGroup{UUID: "33333333-3333-3333-3333-333333333333", Name: "gpu", Role: "worker", NodeCount: 1})
	r, err := templates.Render(in)
	require.NoError(t, err)
	var rendered []string
	for _, g := range r.ServerGroups {
		rendered = append(rendered, g.Name)
	}
	require.NotEmpty(t, rendered)
	require.ElementsMatch(t, rendered, templates.ServerGroupNames(r.Cluster.GetName(), in.NodeGroups))
}
