package templates

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseBool(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  bool
		valid bool
	}{
		{" true ", true, true}, {"True", true, true}, {"1", true, true}, {"yes", true, true}, {"ON", true, true},
		{"false", false, true}, {" 0", false, true}, {"No", false, true}, {"off", false, true},
		{"maybe", false, false}, {"", false, false},
	} {
		got, err := ParseBool(tc.in)
		require.Equal(t, tc.valid, err == nil, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
	// LabelEnabled reads the same spellings, with the registry's default when the label is unset.
	require.True(t, LabelEnabled(map[string]string{LabelAutoScalingEnabled: " True "}, LabelAutoScalingEnabled))
	require.False(t, LabelEnabled(map[string]string{LabelAutoScalingEnabled: "maybe"}, LabelAutoScalingEnabled))
	require.False(t, LabelEnabled(nil, LabelAutoScalingEnabled))
	require.True(t, LabelEnabled(nil, LabelAutoHealingEnabled))
}

func TestParseVersion(t *testing.T) {
	for _, ok := range []string{"v1.36.3", "1.35.0", "v1.030.1"} {
		_, err := ParseVersion(ok)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{"", "v1.36", " v1.36.3", "v1.36.3-rc.1", "latest", "v1.36.3.4"} {
		_, err := ParseVersion(bad)
		require.Error(t, err, bad)
	}
	v, err := ParseVersion("v1.36.3")
	require.NoError(t, err)
	require.Equal(t, []uint{1, 36, 3}, []uint{v.Major(), v.Minor(), v.Patch()})
}
