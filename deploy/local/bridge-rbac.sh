#!/usr/bin/env bash
# Gives the local bridge its own identity in the management cluster instead of the admin's: applies
# deploy/kubernetes/rbac.yaml (ServiceAccount + ClusterRoles) and admission-policy.yaml, keeps a
# token of the ServiceAccount fresh (TokenRequest API, valid 30 days, renewed when less than 15 days
# are left) and writes a kubeconfig that reads it from a file, so a running bridge picks up a renewed
# token without a restart (client-go re-reads token files). Prints the kubeconfig's path.
# Called by bridge-up.sh; idempotent.
set -euo pipefail
# shellcheck source=mgmt-common.sh
. "$(cd "$(dirname "$0")" && pwd)/mgmt-common.sh"
root=$(cd "$mgmt_here/../.." && pwd)
BRIDGE_KUBECONFIG=$STATE_DIR/bridge.kubeconfig
token_file=$STATE_DIR/bridge.token
kubectl=$BIN_DIR/kubectl
[ -x "$kubectl" ] || kubectl=$(command -v kubectl) || die "no kubectl (run deploy/local/build-k8s.sh)"
[ -s "$ADMIN_KUBECONFIG" ] || die "$ADMIN_KUBECONFIG does not exist; run deploy/local/mgmt-up.sh"
k() { "$kubectl" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout=30s "$@"; }

k apply --server-side --field-manager=magnum-capi-bridge-deploy --force-conflicts \
  -f "$root/deploy/kubernetes/rbac.yaml" -f "$root/deploy/kubernetes/admission-policy.yaml" >/dev/null

# token_expiry <file>: the token's exp claim (seconds since the epoch), 0 when unreadable.
token_expiry() {
  local payload
  [ -s "$1" ] || { echo 0; return; }
  payload=$(cut -d. -f2 <"$1" | tr '_-' '/+') || { echo 0; return; }
  while [ $((${#payload} % 4)) != 0 ]; do payload+='='; done
  echo "$payload" | base64 -d 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["exp"])' 2>/dev/null || echo 0
}
if [ "$(token_expiry "$token_file")" -lt $(($(date +%s) + 15 * 86400)) ]; then
  (
    umask 077
    k -n magnum-capi-bridge create token magnum-capi-bridge --duration=720h >"$token_file.tmp"
  )
  mv "$token_file.tmp" "$token_file"
  log "issued a 30-day token for ServiceAccount magnum-capi-bridge/magnum-capi-bridge"
fi

tmp=$BRIDGE_KUBECONFIG.tmp
(
  umask 077
  cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: magnum-capi-bridge-mgmt
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI_DIR/ca.crt")
users:
- name: magnum-capi-bridge
  user:
    tokenFile: $token_file
contexts:
- name: magnum-capi-bridge
  context:
    cluster: magnum-capi-bridge-mgmt
    user: magnum-capi-bridge
current-context: magnum-capi-bridge
EOF
)
if cmp -s "$tmp" "$BRIDGE_KUBECONFIG"; then rm -f "$tmp"; else mv "$tmp" "$BRIDGE_KUBECONFIG"; fi
echo "$BRIDGE_KUBECONFIG"
