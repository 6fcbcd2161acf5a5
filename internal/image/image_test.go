package image

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func spec(t *testing.T, binary string) Spec {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.WriteFile(bin, []byte(binary), 0o755))
	ca := filepath.Join(dir, "ca")
	require.NoError(t, os.Mkdir(ca, 0o755))
	for _, n := range []string{"b.crt", "a.crt", "ignored.pem"} {
		require.NoError(t, os.WriteFile(filepath.Join(ca, n), []byte("cert "+n+"\n"), 0o644))
	}
	return Spec{Binary: bin, CACertDir: ca, Version: "v1", Epoch: time.Unix(1700000000, 0), Arch: "amd64"}
}

func digest(t *testing.T, s Spec) string {
	t.Helper()
	img, err := Build(s)
	require.NoError(t, err)
	d, err := img.Digest()
	require.NoError(t, err)
	return d.String()
}

// The digest depends on the inputs only: not on when or where the image was built.
func TestSameInputsSameDigest(t *testing.T) {
	a, b := spec(t, "binary"), spec(t, "binary")
	require.Equal(t, digest(t, a), digest(t, b))
	other := spec(t, "binary")
	other.Epoch = other.Epoch.Add(time.Second)
	require.NotEqual(t, digest(t, a), digest(t, other))
	require.NotEqual(t, digest(t, a), digest(t, spec(t, "another binary")))
}

func TestBundleInNameOrder(t *testing.T) {
	b, err := caBundle(spec(t, "x").CACertDir)
	require.NoError(t, err)
	require.Equal(t, "cert a.crt\ncert b.crt\n", string(b))
	_, err = caBundle(t.TempDir())
	require.ErrorContains(t, err, "ca-certificates")
}

func TestConfig(t *testing.T) {
	img, err := Build(spec(t, "x"))
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532:65532", cf.Config.User)
	require.Equal(t, []string{Entrypoint}, cf.Config.Entrypoint)
	require.Equal(t, "v1", cf.Config.Labels["org.opencontainers.image.version"])
	require.Equal(t, int64(1700000000), cf.Created.Unix())
}
