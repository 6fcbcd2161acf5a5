package testutil

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEventuallyReturnsOnceCheckPasses(t *testing.T) {
	calls := 0
	Eventually(t, 5*time.Second, "third call", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	require.Equal(t, 3, calls)
}

func TestFreeAddrCanBeListenedOn(t *testing.T) {
	l, err := net.Listen("tcp", FreeAddr(t))
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

func TestRandomHex(t *testing.T) {
	require.Len(t, RandomHex(3), 6)
	require.NotEqual(t, RandomHex(8), RandomHex(8))
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports := FreePorts(t, 8)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
	}
}
