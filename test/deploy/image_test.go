package deploy

import (
	"archive/tar"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/image"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

var digestLine = regexp.MustCompile(`(?m)^image (\S+) (sha256:[0-9a-f]{64})$`)

func makeImage(t *testing.T, dir string) (ref, digest string) {
	t.Helper()
	cmd := exec.Command("make", "-s", "image", "IMAGE_DIR="+dir)
	cmd.Dir = testutil.RepoRoot()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	m := digestLine.FindStringSubmatch(string(out))
	require.NotNil(t, m, "make image prints the digest: %s", out)
	return m[1], m[2]
}

// `make image` twice gives the same digest; the image runs as the non-root user with the bridge as
// its entrypoint, has no shell, and the binary taken out of its layer runs.
func TestMakeImageIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and the image twice")
	}
	dir1, dir2 := t.TempDir(), t.TempDir()
	ref, d1 := makeImage(t, dir1)
	_, d2 := makeImage(t, dir2)
	require.Equal(t, d1, d2, "the same inputs give the same digest")
	t.Logf("%s %s", ref, d1)

	p, err := layout.FromPath(filepath.Join(dir1, "oci"))
	require.NoError(t, err)
	idx, err := p.ImageIndex()
	require.NoError(t, err)
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 1)
	require.Equal(t, d1, m.Manifests[0].Digest.String())
	require.Equal(t, ref, m.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	img, err := p.Image(m.Manifests[0].Digest)
	require.NoError(t, err)

	fromTar, err := tarball.ImageFromPath(filepath.Join(dir1, "magnum-capi-bridge.tar"), nil)
	require.NoError(t, err)
	// A docker-archive tarball carries no manifest of its own (its loaders write one), so the same
	// image shows as the same config (which names every layer's content).
	tarConfig, err := fromTar.ConfigName()
	require.NoError(t, err)
	imgConfig, err := img.ConfigName()
	require.NoError(t, err)
	require.Equal(t, imgConfig, tarConfig, "the tarball holds the same image")

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532:65532", cf.Config.User, "non-root, numeric (runAsNonRoot can verify it)")
	require.Equal(t, []string{image.Entrypoint}, cf.Config.Entrypoint)
	require.Equal(t, "linux", cf.OS)

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	files := map[string]*tar.Header{}
	bin := filepath.Join(t.TempDir(), "magnum-capi-bridge")
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		files[h.Name] = h
		if "/"+h.Name == image.Entrypoint {
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
	}
	for _, sh := range []string{"bin/sh", "bin/bash", "usr/bin/sh"} {
		require.NotContains(t, files, sh, "no shell in the image")
	}
	require.Contains(t, files, strings.TrimPrefix(image.CABundlePath, "/"))
	require.Greater(t, files[strings.TrimPrefix(image.CABundlePath, "/")].Size, int64(100_000), "Debian's CA bundle")
	passwd := files["etc/passwd"]
	require.NotNil(t, passwd)

	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Regexp(t, `^magnum-capi-bridge \S+ \(commit [0-9a-f]{12}\)\n$`, string(out), "version and commit are stamped")
	require.NotContains(t, string(out), "magnum-capi-bridge dev ", "the version is stamped")
	// A static binary (no ELF interpreter): it runs in an image without a C library.
	ef, err := elf.Open(bin)
	require.NoError(t, err)
	defer ef.Close()
	for _, prog := range ef.Progs {
		require.NotEqual(t, elf.PT_INTERP, prog.Type, "dynamically linked")
	}
}
