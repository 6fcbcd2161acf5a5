package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGettersAndErrorsNameTheKey(t *testing.T) {
	f, err := Parse(`
[DEFAULT]
host = conductor-1
transport_url = rabbit://guest:guest@127.0.0.1:5672/
[oslo_messaging_rabbit]
amqp_durable_queues = yes
rabbit_qos_prefetch_count = ten
heartbeat_timeout_threshold = 30
[bridge]
namespaces = a, b,,c
`)
	require.NoError(t, err)
	require.Equal(t, "conductor-1", f.String("DEFAULT", "host", "x"))
	require.Equal(t, "dflt", f.String("DEFAULT", "missing", "dflt"))
	b, err := f.Bool("oslo_messaging_rabbit", "amqp_durable_queues", false)
	require.NoError(t, err)
	require.True(t, b)
	_, err = f.Int("oslo_messaging_rabbit", "rabbit_qos_prefetch_count", 0, 0, 0)
	require.EqualError(t, err, `[oslo_messaging_rabbit] rabbit_qos_prefetch_count: "ten" is not an integer`)
	d, err := f.Seconds("oslo_messaging_rabbit", "heartbeat_timeout_threshold", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, d)
	require.Equal(t, []string{"a", "b", "c"}, f.List("bridge", "namespaces", nil))
	_, err = f.OneOf("bridge", "namespaces", "x", "x", "y")
	require.ErrorContains(t, err, "[bridge] namespaces")
}

func TestLoadMergesFilesLaterWins(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.conf")
	b := filepath.Join(dir, "b.conf")
	require.NoError(t, os.WriteFile(a, []byte("[DEFAULT]\nhost = a\ndebug = true\n"), 0o600))
	require.NoError(t, os.WriteFile(b, []byte("[DEFAULT]\nhost = b\n"), 0o600))
	f, err := Load(a, b)
	require.NoError(t, err)
	require.Equal(t, "b", f.String("DEFAULT", "host", ""))
	require.Equal(t, "true", f.String("DEFAULT", "debug", ""))
	_, err = Load(filepath.Join(dir, "missing.conf"))
	require.Error(t, err)
}

func TestUnreadKeysAndRenamedKeys(t *testing.T) {
	f, err := Parse(`
[bridge]
log_level = debug
infrastrucure = inmemory
old_name = 7
both_old = old
both_new = new
`)
	require.NoError(t, err)
	f.Rename("bridge", "old_name", "new_name")
	f.Rename("bridge", "both_old", "both_new")
	require.Equal(t, "debug", f.String("bridge", "log_level", ""))
	n, err := f.Int("bridge", "new_name", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 7, n, "the former name still sets the option")
	require.Equal(t, "new", f.String("bridge", "both_new", ""), "the new name wins over the former")
	require.Equal(t, []string{
		"[bridge] old_name is deprecated: it is now new_name, and the former name will not be read after the next release",
		"[bridge] both_old is ignored: both_new, its new name, is set",
	}, f.Warnings())
	require.Equal(t, []string{"infrastrucure"}, f.Unread("bridge"), "a misspelt key is reported")
	require.Empty(t, f.Unread("nosuch"))
}
