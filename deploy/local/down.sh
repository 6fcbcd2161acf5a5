#!/usr/bin/env bash
# Stops exactly what up.sh started, newest first; data is kept, so `make up` restores the stack.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
stop_pid bridge-newest 30
stop_pid bridge 30
"$here/capo-down.sh"
"$here/mgmt-down.sh"
"$here/openstack/newest-down.sh"
"$here/openstack/down.sh"
log "local stack stopped"
