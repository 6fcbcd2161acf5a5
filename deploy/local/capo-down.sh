#!/usr/bin/env bash
# Stops the CAPO manager capo-up.sh started (found through its PID file, signalled only while it
# still runs capo-manager). CAPO's CRDs and webhook configurations stay; run it before mgmt-down.sh,
# which does not know about CAPO. capo-up.sh brings the manager back.
set -euo pipefail
# shellcheck source=mgmt-common.sh
. "$(cd "$(dirname "$0")" && pwd)/mgmt-common.sh"

# mgmt-common.sh knows the CAPI components; teach its helpers the CAPO manager's binary.
eval "mgmt_$(declare -f binary_of)"
binary_of() { if [ "$1" = capo ]; then echo capo-manager; else mgmt_binary_of "$1"; fi; }

lock
stop_component capo
