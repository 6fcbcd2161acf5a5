#!/usr/bin/env bash
# Prepares the peer of `make bench-peer` (test/peer): the real magnum-conductor 23.0.0 of the forky
# chroot with StackHPC's magnum-capi-helm driver, as a Magnum deployment runs it.
#   - python3-magnum-capi-helm ($MAGNUM_CAPI_HELM_VERSION) from Debian, unpacked into the chroot's
#     /opt/magnum-peer (not its site-packages: magnum-api 23 there would load it);
#   - helm ($HELM_VERSION) built from the Go module proxy, cached outside the work tree like
#     build-k8s.sh's binaries, and copied to the chroot's /usr/local/bin;
#   - the stand-in openstack-cluster chart (test/peer/standin-chart) packaged into the chroot;
#   - the add-on kinds' stand-in CRDs applied to the management cluster.
# Idempotent; needs `make up` (the chroot and the management cluster). Prints nothing secret.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
ensure_dirs
newest_root=$(. "$here/openstack/stack.env" && echo "$NEWEST_ROOT")
[ -x "$newest_root/usr/bin/magnum-conductor" ] || { log "peer-up: no magnum-conductor in $newest_root: run make up first"; exit 1; }
in_root() {
  chroot "$newest_root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive "$@"
}

# The driver, from Debian (forky), unpacked into a directory of its own that only the peer's
# PYTHONPATH names: installed into the chroot's site-packages, the newest stack's magnum-api (same
# chroot) finds it among its drivers and picks it for Ubuntu templates instead of the bridge's.
# shellcheck disable=SC2016 # dpkg-query's format, not a shell expansion
if in_root dpkg-query -W -f '${Status}' python3-magnum-capi-helm 2>/dev/null | grep -q 'install ok installed'; then
  log "peer-up: removing python3-magnum-capi-helm from the chroot's site-packages (it belongs in /opt/magnum-peer)"
  in_root apt-get purge -y -q python3-magnum-capi-helm >"$MCB_LOG_DIR/peer-apt.log" 2>&1
fi
peer_lib=$newest_root/opt/magnum-peer
have=$(cat "$peer_lib/.version" 2>/dev/null || true)
if [ "${have%%-*}" != "$MAGNUM_CAPI_HELM_VERSION" ]; then
  log "peer-up: unpacking python3-magnum-capi-helm into /opt/magnum-peer of the chroot (log $MCB_LOG_DIR/peer-apt.log)"
  fetch() { in_root sh -c 'cd /var/cache/apt/archives && apt-get -o DPkg::Lock::Timeout=900 download -q python3-magnum-capi-helm'; }
  { fetch || { in_root apt-get -o DPkg::Lock::Timeout=900 update -q && fetch; }; } >"$MCB_LOG_DIR/peer-apt.log" 2>&1 ||
    { tail -n 20 "$MCB_LOG_DIR/peer-apt.log" >&2; log "peer-up: apt-get download in the chroot failed"; exit 1; }
  # The newest download (ls -t); Debian package file names hold no spaces or newlines.
  # shellcheck disable=SC2012
  deb=$(ls -t "$newest_root"/var/cache/apt/archives/python3-magnum-capi-helm_*.deb | head -1)
  rm -rf "$peer_lib" && mkdir -p "$peer_lib"
  dpkg-deb -x "$deb" "$peer_lib"
  have=$(dpkg-deb -f "$deb" Version)
  echo "$have" >"$peer_lib/.version"
  [ "${have%%-*}" = "$MAGNUM_CAPI_HELM_VERSION" ] ||
    log "peer-up: WARNING Debian now serves python3-magnum-capi-helm $have, not $MAGNUM_CAPI_HELM_VERSION (the figures name the version)"
fi
log "peer-up: magnum-capi-helm $have in /opt/magnum-peer of the chroot"

# helm, from the module proxy, once per version.
cache=$MCB_CACHE/helm-$HELM_VERSION
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if ! [ -x "$cache/helm" ]; then
  log "peer-up: building helm $HELM_VERSION from the module proxy (a few minutes, niced)"; t0=$SECONDS
  tmp=$(mktemp -d "$cache/gobin.XXXXXX")
  (cd "$tmp" && GOBIN=$tmp CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -p=${MCB_BUILD_JOBS:-2}" \
    nice -n 19 go install -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
  mv "$tmp/helm" "$cache/helm"; rm -rf "$tmp"
  log "peer-up: helm built in $((SECONDS - t0))s"
fi
cmp -s "$cache/helm" "$newest_root/usr/local/bin/helm" 2>/dev/null || install -m 755 "$cache/helm" "$newest_root/usr/local/bin/helm"

# The chart, packaged where the conductor (in the chroot) reads it.
chart_dir=$newest_root/var/lib/magnum-peer
mkdir -p "$chart_dir"
HELM_CACHE_HOME=$cache/home/cache HELM_CONFIG_HOME=$cache/home/config HELM_DATA_HOME=$cache/home/data \
  "$cache/helm" package "$root/test/peer/standin-chart" -d "$chart_dir" >/dev/null
log "peer-up: chart $(printf '%s\n' "$chart_dir"/openstack-cluster-*.tgz | sed "s#^$newest_root##")"

"$MCB_BIN_DIR/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" apply --server-side -f "$root/test/peer/addons-standin-crds.yaml" >/dev/null
log "peer-up: add-on stand-in CRDs applied"
