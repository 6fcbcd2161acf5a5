package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

func TestObservabilityOptions(t *testing.T) {
	o, err := quotaOptions(t, "")
	require.NoError(t, err)
	assert.Equal(t, "text", o.Bridge.LogFormat)
	assert.Empty(t, o.Bridge.MetricsBind, "off by default")
	assert.True(t, o.Bridge.LeaderElection)
	assert.Equal(t, "magnum-capi-bridge", o.Bridge.LeaderElectionNamespace)
	assert.Equal(t, "magnum-capi-bridge-magnum", o.Bridge.LeaderElectionID)
	assert.Nil(t, o.Notifications, "no driver: no notifications")

	o, err = quotaOptions(t, "namespace_prefix = magnum23-\nlog_format = json\nmetrics_bind = 127.0.0.1:9591\n")
	require.NoError(t, err)
	assert.Equal(t, "json", o.Bridge.LogFormat)
	assert.Equal(t, "127.0.0.1:9591", o.Bridge.MetricsBind)
	assert.Equal(t, "magnum-capi-bridge-magnum23", o.Bridge.LeaderElectionID)

	for lines, want := range map[string]string{
		"log_format = yaml\n":           "[bridge] log_format",
		"metrics_bind = 9590\n":         "[bridge] metrics_bind",
		"leader_election_id = Not_Ok\n": "[bridge] leader_election_id",
		"leader_election = maybe\n":     "[bridge] leader_election",
	} {
		_, err := quotaOptions(t, lines)
		assert.ErrorContains(t, err, want, lines)
	}
}

func TestNotificationOptions(t *testing.T) {
	parse := func(s string) (*NotificationOptions, error) {
		f, err := config.Parse(s)
		require.NoError(t, err)
		return notificationOptionsFrom(f)
	}
	n, err := parse("[oslo_messaging_notifications]\ndriver = messagingv2\n")
	require.NoError(t, err)
	assert.Equal(t, &NotificationOptions{Driver: "messagingv2", Topics: []string{"notifications"}}, n)
	n, err = parse("[oslo_messaging_notifications]\ndriver = noop\n")
	require.NoError(t, err)
	assert.Nil(t, n)
	n, err = parse("[oslo_messaging_notifications]\ndriver = messaging\ntopics = notifications,billing\n")
	require.NoError(t, err)
	assert.Equal(t, []string{"notifications", "billing"}, n.Topics)
	_, err = parse("[oslo_messaging_notifications]\ndriver = log\n")
	assert.ErrorContains(t, err, `"log" is not supported`)
}

func TestPregeneratedKeysOption(t *testing.T) {
	o, err := quotaOptions(t, "")
	require.NoError(t, err)
	assert.Equal(t, 32, o.Bridge.PregeneratedKeys, "eight clusters' worth by default")
	o, err = quotaOptions(t, "pregenerated_keys = 0\n")
	require.NoError(t, err)
	assert.Zero(t, o.Bridge.PregeneratedKeys, "0: no pool")
	_, err = quotaOptions(t, "pregenerated_keys = 5000\n")
	assert.ErrorContains(t, err, "[bridge] pregenerated_keys")
}
