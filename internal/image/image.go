// Package image builds the bridge's container image without a container engine, with
// go-containerregistry: one layer holding the static binary, the CA bundle of Debian's
// ca-certificates package and a passwd/group naming the non-root user; no shell, no package manager.
// Every timestamp is the given epoch and files are written in a fixed order, so the same inputs give
// the same digest.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// UID and GID of the user the bridge runs as ("nonroot", as in distroless images).
	UID = 65532
	// Entrypoint is the binary's path in the image.
	Entrypoint = "/usr/local/bin/magnum-capi-bridge"
	// CABundlePath is where Go's crypto/x509 looks first on Linux.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// Spec is everything the image is made of.
type Spec struct {
	Binary string // the static magnum-capi-bridge binary
	// CACertDir holds the CA certificates (*.crt) concatenated, in name order, into the bundle:
	// /usr/share/ca-certificates/mozilla of Debian's ca-certificates package (not the host's
	// /etc/ssl/certs, which may carry local CAs).
	CACertDir string
	Version   string
	Epoch     time.Time // every timestamp in the image
	Arch      string    // GOARCH of the binary
}

type file struct {
	path string
	mode int64
	data []byte
	dir  bool
}

// Build returns the image.
func Build(s Spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	bundle, err := caBundle(s.CACertDir)
	if err != nil {
		return nil, err
	}
	files := []file{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", UID)},
		{path: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/nonexistent:/sbin/nologin\n", UID, UID)},
		{path: "etc/ssl/", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/", mode: 0o755, dir: true},
		{path: strings.TrimPrefix(CABundlePath, "/"), mode: 0o644, data: bundle},
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: "usr/", mode: 0o755, dir: true},
		{path: "usr/local/", mode: 0o755, dir: true},
		{path: "usr/local/bin/", mode: 0o755, dir: true},
		{path: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: bin},
	}
	layerTar, err := tarFiles(files, s.Epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = s.Arch, "linux"
	cf.Created = v1.Time{Time: s.Epoch.UTC()}
	cf.Config.User = fmt.Sprintf("%d:%d", UID, UID)
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CABundlePath}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "magnum-capi-bridge",
		"org.opencontainers.image.version": s.Version,
		"org.opencontainers.image.source":  "https://github.com/magnum-capi-bridge/magnum-capi-bridge",
	}
	for i := range cf.History {
		cf.History[i].Created = v1.Time{Time: s.Epoch.UTC()}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Epoch.UTC()})
}

func caBundle(dir string) ([]byte, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.crt"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no CA certificates (*.crt) in %s: install Debian's ca-certificates package", dir)
	}
	sort.Strings(paths)
	var b bytes.Buffer
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		b.Write(bytes.TrimSpace(data))
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

func tarFiles(files []file, epoch time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: epoch, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write replaces an OCI image layout at layoutDir and a `docker load`/`podman load` tarball at
// tarPath with the image, tagged ref.
func Write(img v1.Image, ref, layoutDir, tarPath string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(layoutDir); err != nil {
		return err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.String()})); err != nil {
		return err
	}
	return tarball.WriteToFile(tarPath, tag, img)
}
