#!/usr/bin/env bash
# (Re)starts the bridge against the local stack. It reads the same /etc/magnum/magnum.conf as
# magnum-api plus its own section in $MCB_ETC/bridge.conf. A running bridge whose binary or
# configuration changed is restarted; otherwise this is a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/common.sh"
. "$here/versions.env"
bin=$root/bin/magnum-capi-bridge
[ -x "$bin" ] || (cd "$root" && make -s build)
conf=$MCB_ETC/bridge.conf
cat > "$conf.new" <<CONF
# Written by deploy/local/bridge-up.sh: the bridge's own settings for the local stack.
[DEFAULT]
host = $(hostname)-bridge

[bridge]
kubeconfig = $MCB_STATE/mgmt/admin.kubeconfig
namespace_prefix = magnum-
infrastructure = inmemory
default_kubernetes_version = $DEFAULT_WORKLOAD_K8S_VERSION
CONF
stamp=$( (sha256sum "$bin" /etc/magnum/magnum.conf "$conf.new") | sha256sum | cut -c1-16)
if pid_alive bridge && [ "$(cat "$MCB_RUN/bridge.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "bridge already running (pid $(cat "$MCB_RUN/bridge.pid"))"; rm -f "$conf.new"; exit 0
fi
mv "$conf.new" "$conf"
stop_pid bridge 30
log "starting the bridge"
"$bin" --check-config --config-file /etc/magnum/magnum.conf --config-file "$conf"
start-stop-daemon --start --background --make-pidfile --pidfile "$MCB_RUN/bridge.pid" \
  --output "$MCB_LOG/bridge.log" --exec "$bin" -- --config-file /etc/magnum/magnum.conf --config-file "$conf"
echo "$stamp" > "$MCB_RUN/bridge.stamp"
wait_for "the bridge's heartbeat" 30 bash -c "grep -q 'serving' '$MCB_LOG/bridge.log'"
log "bridge running (pid $(cat "$MCB_RUN/bridge.pid")), log $MCB_LOG/bridge.log"
