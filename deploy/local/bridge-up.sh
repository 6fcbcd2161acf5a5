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
# The devstack plugin's own functions install, configure and start the bridge (deploy/devstack),
# with stand-ins for the few devstack functions they call.
. "$here/devstack-shims.sh"
# Only the management cluster's paths: mgmt-common.sh's log/die would replace this script's.
eval "$(. "$here/mgmt-common.sh" && declare -p ADMIN_KUBECONFIG STATE_DIR BIN_DIR)"
MAGNUM_CAPI_BRIDGE_DIR=$root MAGNUM_CAPI_BRIDGE_BUILD=False MAGNUM_CAPI_BRIDGE_BIN=$bin PYTHON=/usr/bin/python3
MAGNUM_CAPI_BRIDGE_SERVICE=$name MAGNUM_CAPI_BRIDGE_MAGNUM_CONF=$magnum_conf MAGNUM_CAPI_BRIDGE_CONF=$conf
# The bridge's own ServiceAccount (deploy/kubernetes/rbac.yaml), not the management cluster's admin.
MAGNUM_CAPI_BRIDGE_ADMIN_KUBECONFIG=$ADMIN_KUBECONFIG MAGNUM_CAPI_BRIDGE_KUBECONFIG=$STATE_DIR/bridge.kubeconfig
MAGNUM_CAPI_BRIDGE_KUBECTL=$BIN_DIR/kubectl
MAGNUM_CAPI_BRIDGE_NAMESPACE_PREFIX=$prefix MAGNUM_CAPI_BRIDGE_INFRASTRUCTURE=inmemory
MAGNUM_CAPI_BRIDGE_KUBERNETES_VERSION=$DEFAULT_WORKLOAD_K8S_VERSION MAGNUM_CAPI_BRIDGE_MAGNUM_RELEASE=$release
MAGNUM_CAPI_BRIDGE_HOST=$(hostname)-$name
. "$root/deploy/devstack/settings"
. "$root/deploy/devstack/plugin.sh"

install_magnum_capi_bridge
configure_magnum_capi_bridge_kubernetes
cat > "$conf.new" <<CONF
# Written by deploy/local/bridge-up.sh ${1:-zed} with the devstack plugin's configure_magnum_capi_bridge.
# Per-cluster Keystone application credentials are issued as the requesting user and deleted with the
# cluster, even though in-memory machines call no cloud: the local stack exercises their lifecycle.
CONF
configure_magnum_capi_bridge "$conf.new"
stamp=$( (sha256sum "$bin" "$magnum_conf" "$conf.new") | sha256sum | cut -c1-16)
if pid_alive "$name" && [ "$(cat "$MCB_RUN/$name.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "$name already running (pid $(cat "$MCB_RUN/$name.pid"))"; rm -f "$conf.new"; exit 0
fi
mv "$conf.new" "$conf"
stop_magnum_capi_bridge
log "starting $name"
# The log is appended to: the wait below looks for this start's "serving" only.
seen=0
[ ! -e "$MCB_LOG/$name.log" ] || seen=$(wc -l <"$MCB_LOG/$name.log")
start_magnum_capi_bridge
echo "$stamp" > "$MCB_RUN/$name.stamp"
wait_for "$name's heartbeat" 30 bash -c "tail -n +$((seen + 1)) '$MCB_LOG/$name.log' | grep -q 'serving'"
log "$name running (pid $(cat "$MCB_RUN/$name.pid")), log $MCB_LOG/$name.log"
