#!/usr/bin/env bash
# Builds the management cluster's binaries from the Go module proxy and caches them outside the work
# tree, so a fresh clone (CI) reuses them. A target is rebuilt only when its module's go.mod/go.sum/
# sources or versions.env change. Usage: build-k8s.sh [target ...]   (default: all)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
bin=$MCB_BIN_DIR
mkdir -p "$bin"
export GOFLAGS="-trimpath -buildvcs=false" CGO_ENABLED=0

k8s_stamp() {
  local v=$1 major minor
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z ' \
      "$p" "$v" "$p" "$major" "$p" "$minor" "$p" "$p"
  done
}
capi_stamp() {
  printf -- '-X sigs.k8s.io/cluster-api/version.gitVersion=%s -X sigs.k8s.io/cluster-api/version.gitTreeState=clean -X sigs.k8s.io/cluster-api/version.buildDate=1970-01-01T00:00:00Z' "$1"
}

# fingerprint of what a target is built from (versions, go.mod/go.sum, and the sources of its own
# package when it is ours): rebuild only when that changes.
fp() {
  local dir=$1 pkg=$2
  (sed '/^# Clients built for the end-to-end tests/,$d' "$here/versions.env"; cat "$dir/go.mod" "$dir/go.sum"
   case $pkg in ./*) find "$dir/$pkg" -maxdepth 1 -type f -name '*.go' | sort | xargs cat ;; esac) | sha256sum | cut -c1-16
}

build() { # name moddir pkg ldflags
  local name=$1 dir=$2 pkg=$3 ld=$4 f
  f=$(fp "$dir" "$pkg")
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/$name.fp" 2>/dev/null)" = "$f" ]; then
    echo "build-k8s: $name up to date"; return
  fi
  echo "build-k8s: building $name ($pkg) ..."; local t0=$SECONDS
  (cd "$dir" && { [ -f go.sum ] || go mod tidy; } && go build -ldflags "-s -w $ld" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"; echo "$f" > "$bin/$name.fp"
  echo "build-k8s: $name built in $((SECONDS - t0))s"
}

targets=${*:-all}
want() { [[ " $targets " == *" all "* || " $targets " == *" $1 "* ]]; }
tk=$root/tools/k8s
if want apiserver; then
  build kube-apiserver "$tk/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$(k8s_stamp "$KUBERNETES_VERSION")"
  build kube-controller-manager "$tk/apiserver" k8s.io/kubernetes/cmd/kube-controller-manager "$(k8s_stamp "$KUBERNETES_VERSION")"
  build kubectl "$tk/apiserver" k8s.io/kubernetes/cmd/kubectl "$(k8s_stamp "$KUBERNETES_VERSION")"
fi
if want etcd; then build etcd "$tk/etcd" . ""; fi
if want capi; then
  build capi-manager "$tk/capi" sigs.k8s.io/cluster-api/core "$(capi_stamp "$CAPI_VERSION")"
  build kcp-manager "$tk/capi" sigs.k8s.io/cluster-api/controlplane/kubeadm "$(capi_stamp "$CAPI_VERSION")"
  build cabpk-manager "$tk/capi" sigs.k8s.io/cluster-api/bootstrap/kubeadm "$(capi_stamp "$CAPI_VERSION")"
  build capd-manager "$tk/capi" sigs.k8s.io/cluster-api/test/infrastructure/docker "$(capi_stamp "$CAPI_VERSION")"
  build capi-install "$tk/capi" ./cmd/capi-install ""
fi
# CAPO lives in its own module: it pins CAPI v1.12 / controller-runtime v0.22, unlike tools/k8s/capi.
# Not part of "all": only the CAPO dry-run test (test/capo) and deploy/local/capo-up.sh need it.
if [[ " $targets " == *" capo "* ]]; then
  # The version comes from the module's go.mod (part of the fingerprint), not versions.env: a line
  # there would change every other target's fingerprint too.
  capo_version=$(cd "$tk/capo" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api-provider-openstack)
  build capo-manager "$tk/capo" sigs.k8s.io/cluster-api-provider-openstack \
    "-X sigs.k8s.io/cluster-api-provider-openstack/version.gitVersion=$capo_version -X sigs.k8s.io/cluster-api-provider-openstack/version.gitTreeState=clean"
fi
echo "build-k8s: binaries in $bin"
