package app

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

func TestPrintPlan(t *testing.T) {
	var b bytes.Buffer
	printPlan(&b, []conductor.RenderingPlan{
		{UUID: "u1", Name: "a", ProjectID: "p", Status: magnum.StatusCreateComplete, Class: "magnum-old", CurrentClass: "magnum-new",
			Changes: []string{"worker group default-worker's bootstrap template"}, Workers: []string{"default-worker"}, Machines: []string{"m1", "m2"}},
		{UUID: "u2", Name: "b", ProjectID: "p", Status: magnum.StatusUpdateComplete, RenderedBy: "v0.1.0", Class: "magnum-x", CurrentClass: "magnum-y",
			Changes: []string{"the infrastructure cluster template"}},
		{UUID: "u3", Name: "c", ProjectID: "p", Status: magnum.StatusCreateComplete, Class: "magnum-new", CurrentClass: "magnum-new"},
		{UUID: "u4", Name: "d", ProjectID: "p", Status: magnum.StatusCreateFailed, Error: "cluster template t no longer exists"},
	})
	require.Equal(t, `4 cluster(s), 2 with another rendering than the running bridge's
- a u1 (project p, CREATE_COMPLETE): class magnum-old (rendered by a bridge before v0.1.0) → magnum-new
    changes: worker group default-worker's bootstrap template
    rolls: worker group default-worker — 2 machine(s): m1 m2
- b u2 (project p, UPDATE_COMPLETE): class magnum-x (rendered by v0.1.0) → magnum-y
    changes: the infrastructure cluster template
    rolls: no machine
- c u3 (project p, CREATE_COMPLETE): current (class magnum-new)
- d u4 (project p, CREATE_FAILED): cannot be planned: cluster template t no longer exists
`, b.String())
}

func TestRenderingArguments(t *testing.T) {
	for args, want := range map[string][]string{
		"no subcommand":   nil,
		"unknown":         {"frob"},
		"bad flag":        {"plan", "--nope"},
		"zero concurrent": {"apply", "--concurrency", "0"},
	} {
		t.Run(args, func(t *testing.T) {
			err := Rendering(context.Background(), &Options{}, want, &bytes.Buffer{})
			require.Error(t, err)
		})
	}
}
