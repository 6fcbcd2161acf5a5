#!/usr/bin/env bash
# Prints the path of the management cluster's admin kubeconfig (written by mgmt-up.sh):
#   export KUBECONFIG=$(deploy/local/mgmt-kubeconfig.sh)
# Fails when the file does not exist yet, so a caller does not silently use another cluster.
set -euo pipefail
# shellcheck source=mgmt-common.sh
. "$(cd "$(dirname "$0")" && pwd)/mgmt-common.sh"
[ -s "$ADMIN_KUBECONFIG" ] || die "$ADMIN_KUBECONFIG does not exist; run deploy/local/mgmt-up.sh"
echo "$ADMIN_KUBECONFIG"
