#!/usr/bin/env bash
# Stops exactly what up.sh started, newest first; data is kept, so `make up` restores the stack.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_dirs
# Every bridge replica (BRIDGE_REPLICAS), newest first.
for f in "$MCB_RUN_DIR"/bridge-newest*.pid "$MCB_RUN_DIR"/bridge*.pid; do
  [ -e "$f" ] || continue
  n=${f##*/}
  stop_pid "${n%.pid}" 30
done
stop_pid horizon 30
"$here/capo-down.sh"
"$here/mgmt-down.sh"
"$here/openstack/newest-down.sh"
"$here/openstack/down.sh"
log "local stack stopped"
