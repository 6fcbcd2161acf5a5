// Command mkimage writes the bridge's container image (internal/image) as an OCI layout and a
// tarball and prints its digest; `make image` runs it. No container engine is needed.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/image"
)

func main() {
	var s image.Spec
	var ref, layoutDir, tarPath string
	flag.StringVar(&s.Binary, "binary", "", "the static magnum-capi-bridge binary")
	flag.StringVar(&s.CACertDir, "ca-dir", "/usr/share/ca-certificates/mozilla", "CA certificates of Debian's ca-certificates package")
	flag.StringVar(&s.Version, "version", "dev", "image version label and tag")
	flag.StringVar(&s.Arch, "arch", runtime.GOARCH, "architecture of the binary")
	flag.StringVar(&ref, "ref", "", "image reference (default magnum-capi-bridge:<version>)")
	flag.StringVar(&layoutDir, "layout", "bin/image/oci", "OCI image layout directory (replaced)")
	flag.StringVar(&tarPath, "tarball", "bin/image/magnum-capi-bridge.tar", "image tarball (replaced)")
	flag.Parse()
	// SOURCE_DATE_EPOCH (reproducible-builds.org) is the only time in the image.
	epoch := int64(0)
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fail(fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", v))
		}
		epoch = n
	}
	s.Epoch = time.Unix(epoch, 0)
	if ref == "" {
		ref = "magnum-capi-bridge:" + s.Version
	}
	img, err := image.Build(s)
	if err != nil {
		fail(err)
	}
	if err := image.Write(img, ref, layoutDir, tarPath); err != nil {
		fail(err)
	}
	digest, err := img.Digest()
	if err != nil {
		fail(err)
	}
	fmt.Printf("image %s %s\n  OCI layout: %s\n  tarball:    %s\n", ref, digest, layoutDir, tarPath)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkimage:", err)
	os.Exit(1)
}
