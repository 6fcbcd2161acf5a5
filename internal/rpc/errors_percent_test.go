package rpc

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Magnum's exception applies `message % kwargs` on the client: a literal % must be sent doubled.
func TestMagnumFailureMessageEscapesPercent(t *testing.T) {
	raw, err := NewMagnumError("NotSupported", 400, "Resizing to 50% is not supported.", nil).encode()
	require.NoError(t, err)
	var f struct {
		Message string `json:"message"`
		Args    []any  `json:"args"`
	}
	require.NoError(t, json.Unmarshal(raw, &f))
	require.Equal(t, "Resizing to 50% is not supported.", f.Message)
	require.Equal(t, []any{"Resizing to 50%% is not supported."}, f.Args)

	other, err := (&RemoteError{Module: "oslo_messaging.rpc.dispatcher", Class: "NoSuchMethod", Message: "100%"}).encode()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(other, &f))
	require.Equal(t, []any{"100%"}, f.Args)
}
