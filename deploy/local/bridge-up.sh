#!/usr/bin/env bash
# (Re)starts a bridge instance against the local stack. It reads the same magnum.conf as its
# magnum-api plus its own section in $MCB_ETC/<instance>.conf. A running bridge whose binary or
# configuration changed is restarted; otherwise this is a no-op.
#
# Usage: bridge-up.sh [zed|newest]
#   zed (default)  magnum-api 15.0.1: /etc/magnum/magnum.conf, namespaces magnum-<project>,
#                  PID file $MCB_RUN/bridge.pid, log $MCB_LOG/bridge.log
#   newest         magnum-api 23.0.0 in the forky chroot (openstack/newest-up.sh): its magnum.conf
#                  (vhost magnum-new, database magnum_new), namespaces magnum23-<project>,
#                  PID file $MCB_RUN/bridge-newest.pid, log $MCB_LOG/bridge-newest.log
# The two instances share the management cluster; distinct namespace prefixes keep their objects apart.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/common.sh"
. "$here/versions.env"
case ${1:-zed} in
zed)
  name=bridge magnum_conf=/etc/magnum/magnum.conf prefix=magnum- release=""
  ;;
newest)
  # Only NEWEST_ROOT: stack.env's MCB_STATE_DIR means something else to mgmt-common.sh (bridge-rbac.sh).
  newest_root=$(. "$here/openstack/stack.env" && echo "$NEWEST_ROOT")
  name=bridge-newest magnum_conf=$newest_root/etc/magnum/magnum.conf prefix=magnum23- release=23
  [ -s "$magnum_conf" ] || { log "no $magnum_conf: run deploy/local/openstack/newest-up.sh first"; exit 1; }
  ;;
*)
  echo "usage: $0 [zed|newest]" >&2; exit 2
  ;;
esac
bin=$root/bin/magnum-capi-bridge
[ -x "$bin" ] || (cd "$root" && make -s build)
conf=$MCB_ETC/$name.conf
# The bridge's own ServiceAccount (deploy/kubernetes/rbac.yaml), not the management cluster's admin.
bridge_kubeconfig=$("$here/bridge-rbac.sh")
cat > "$conf.new" <<CONF
# Written by deploy/local/bridge-up.sh ${1:-zed}: the bridge's own settings for the local stack.
[DEFAULT]
host = $(hostname)-$name

[bridge]
kubeconfig = $bridge_kubeconfig
namespace_prefix = $prefix
infrastructure = inmemory
default_kubernetes_version = $DEFAULT_WORKLOAD_K8S_VERSION
# Per-cluster Keystone application credentials, issued as the requesting user and deleted with the
# cluster, even though in-memory machines call no cloud: the local stack exercises their lifecycle.
cluster_credentials = true
CONF
[ -z "$release" ] || echo "magnum_release = $release" >> "$conf.new"
# BRIDGE_EXTRA_CONFIG: more [bridge] lines (e.g. the fault stage's short update_timeout); a change
# restarts the bridge, and running bridge-up.sh again without it restores the default.
[ -z "${BRIDGE_EXTRA_CONFIG:-}" ] || printf '%s\n' "$BRIDGE_EXTRA_CONFIG" >> "$conf.new"
stamp=$( (sha256sum "$bin" "$magnum_conf" "$conf.new") | sha256sum | cut -c1-16)
if pid_alive "$name" && [ "$(cat "$MCB_RUN/$name.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "$name already running (pid $(cat "$MCB_RUN/$name.pid"))"; rm -f "$conf.new"; exit 0
fi
mv "$conf.new" "$conf"
stop_pid "$name" 30
log "starting $name"
"$bin" --check-config --config-file "$magnum_conf" --config-file "$conf"
# The log is appended to: the wait below looks for this start's "serving" only.
seen=0
[ ! -e "$MCB_LOG/$name.log" ] || seen=$(wc -l <"$MCB_LOG/$name.log")
start-stop-daemon --start --background --make-pidfile --pidfile "$MCB_RUN/$name.pid" \
  --output "$MCB_LOG/$name.log" --exec "$bin" -- --config-file "$magnum_conf" --config-file "$conf"
echo "$stamp" > "$MCB_RUN/$name.stamp"
wait_for "$name's heartbeat" 30 bash -c "tail -n +$((seen + 1)) '$MCB_LOG/$name.log' | grep -q 'serving'"
log "$name running (pid $(cat "$MCB_RUN/$name.pid")), log $MCB_LOG/$name.log"
