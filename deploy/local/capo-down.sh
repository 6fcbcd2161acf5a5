#!/usr/bin/env bash
# Stops the CAPO manager capo-up.sh started (found through its PID file, signalled only while it
# still runs capo-manager). CAPO's CRDs and webhook configurations stay; run it before mgmt-down.sh,
# which does not know about CAPO. capo-up.sh brings the manager back.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
log_prefix="mgmt: "

mgmt_lock
stop_component capo
