package logctx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContextAttributesOnEveryLine(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "json", "info")
	require.NoError(t, err)
	ctx := With(context.Background(), slog.String("cluster", "c-1"), slog.String("method", "cluster_create"))
	ctx = With(ctx, slog.String("request_id", "req-1"), slog.String("method", "cluster_update"))
	log.InfoContext(ctx, "applied", "cluster", "explicit-wins")
	log.With("component", "x").WarnContext(ctx, "second")
	log.Info("no context")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 3)
	var first, second, third map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	require.NoError(t, json.Unmarshal(lines[1], &second))
	require.NoError(t, json.Unmarshal(lines[2], &third))
	assert.Equal(t, "explicit-wins", first["cluster"], "an attribute of the line itself is not overwritten")
	assert.Equal(t, "cluster_update", first["method"], "a later With replaces the key")
	assert.Equal(t, "req-1", first["request_id"])
	assert.Equal(t, "c-1", second["cluster"])
	assert.Equal(t, "x", second["component"])
	assert.NotContains(t, third, "cluster")
	assert.Equal(t, "req-1", Value(ctx, "request_id"))
}

func TestNewRefusesBadSettings(t *testing.T) {
	_, err := New(&bytes.Buffer{}, "yaml", "info")
	assert.ErrorContains(t, err, `log format "yaml"`)
	_, err = New(&bytes.Buffer{}, "text", "loud")
	assert.ErrorContains(t, err, `log level "loud"`)
	log, err := New(&bytes.Buffer{}, "", "debug")
	require.NoError(t, err)
	assert.True(t, log.Enabled(context.Background(), slog.LevelDebug))
}
