#!/usr/bin/env bash
# Builds OpenTofu and terraform-provider-openstack (the versions in versions.env) from the Go module proxy
# for the Terraform end-to-end test, once per version, cached outside the work tree like build-k8s.sh's
# binaries. Lays out a filesystem mirror and a CLI config so `tofu init` needs no registry:
#
#   TF_CLI_CONFIG_FILE=$cache/tofu/tofurc $cache/tofu/tofu init
#
# HashiCorp Terraform cannot be built from the proxy (nested modules are missing); OpenTofu can, but
# not with `go install` (its go.mod has a replace), so it is built inside its downloaded module.
# The build runs under `nice` (two cores are shared with the running stack); MCB_BUILD_JOBS sets go's -p.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
cache=$MCB_CACHE/tofu
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # two `make up`s at once build once
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -p=${MCB_BUILD_JOBS:-2}"
gobuild() { nice -n 19 go "$@"; }

tofu_dir=$cache/opentofu-$OPENTOFU_VERSION
pv=${OPENSTACK_PROVIDER_VERSION#v}
provider=terraform-provider-openstack_v$pv
prov_dir=$cache/mirror/registry.opentofu.org/terraform-provider-openstack/openstack/$pv/linux_amd64

if [ -x "$tofu_dir/tofu" ]; then
  echo "build-tofu: tofu $OPENTOFU_VERSION up to date"
else
  echo "build-tofu: building tofu $OPENTOFU_VERSION ..."; t0=$SECONDS
  src=$(cd "$cache" && gobuild mod download -json "github.com/opentofu/opentofu@$OPENTOFU_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || { echo "build-tofu: module github.com/opentofu/opentofu@$OPENTOFU_VERSION not downloaded" >&2; exit 1; }
  mkdir -p "$tofu_dir"
  # version.dev=no: a release build, so `tofu version` prints the plain version.
  (cd "$src" && gobuild build -mod=readonly -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
    -o "$tofu_dir/tofu.tmp" ./cmd/tofu)
  mv "$tofu_dir/tofu.tmp" "$tofu_dir/tofu"
  echo "build-tofu: tofu built in $((SECONDS - t0))s"
fi

if [ -x "$prov_dir/$provider" ]; then
  echo "build-tofu: provider $OPENSTACK_PROVIDER_VERSION up to date"
else
  echo "build-tofu: building terraform-provider-openstack $OPENSTACK_PROVIDER_VERSION ..."; t0=$SECONDS
  tmp=$(mktemp -d "$cache/gobin.XXXXXX")
  GOBIN=$tmp gobuild install -ldflags "-s -w" \
    "github.com/terraform-provider-openstack/terraform-provider-openstack/v3@$OPENSTACK_PROVIDER_VERSION"
  mkdir -p "$prov_dir"
  mv "$tmp/terraform-provider-openstack" "$prov_dir/$provider"
  rmdir "$tmp"
  echo "build-tofu: provider built in $((SECONDS - t0))s"
fi

# The stable names the test uses; the mirror holds only the pinned provider version.
find "$cache/mirror/registry.opentofu.org/terraform-provider-openstack/openstack" -mindepth 1 -maxdepth 1 \
  ! -name "$pv" -exec rm -rf {} +
ln -sfn "opentofu-$OPENTOFU_VERSION/tofu" "$cache/tofu"
cat >"$cache/tofurc.tmp" <<EOF
# Written by deploy/local/build-tofu.sh: providers come only from the local mirror (no registry).
provider_installation {
  filesystem_mirror {
    path    = "$cache/mirror"
    include = ["registry.opentofu.org/terraform-provider-openstack/openstack"]
  }
}
EOF
mv "$cache/tofurc.tmp" "$cache/tofurc"
echo "build-tofu: $cache/tofu ($OPENTOFU_VERSION), provider $OPENSTACK_PROVIDER_VERSION, CLI config $cache/tofurc"
