#!/usr/bin/env bash
# Prints the path of the management cluster's admin kubeconfig (written by mgmt-up.sh):
#   export KUBECONFIG=$(deploy/local/mgmt-kubeconfig.sh)
# Fails when the file does not exist yet, so a caller does not silently use another cluster.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
log_prefix="mgmt: "
[ -s "$ADMIN_KUBECONFIG" ] || die "$ADMIN_KUBECONFIG does not exist; run deploy/local/mgmt-up.sh"
echo "$ADMIN_KUBECONFIG"
