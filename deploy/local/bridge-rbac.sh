#!/usr/bin/env bash
# Gives the local bridge its own identity in the management cluster instead of the admin's, with the
# devstack plugin's configure_magnum_capi_bridge_kubernetes: applies the chart's CRDs
# (deploy/helm/magnum-capi-bridge/crds), deploy/kubernetes/rbac.yaml
# (ServiceAccount + ClusterRoles), admission-policy.yaml and priority-class.yaml (the cluster-
# autoscalers' PriorityClass), keeps a token of the ServiceAccount fresh (TokenRequest API, valid 30
# days, renewed when less than 15 days are left) and writes a kubeconfig that reads it from a file, so
# a running bridge picks up a renewed token without a restart (client-go re-reads token files). Prints the kubeconfig's path. bridge-up.sh calls the same function; idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
ensure_dirs
use_devstack_shims
[ -s "$ADMIN_KUBECONFIG" ] || die $LINENO "$ADMIN_KUBECONFIG does not exist; run deploy/local/mgmt-up.sh"
kubectl=$MCB_BIN_DIR/kubectl
[ -x "$kubectl" ] || kubectl=$(command -v kubectl) || die $LINENO "no kubectl (run deploy/local/build-k8s.sh)"
MAGNUM_CAPI_BRIDGE_DIR=$root MAGNUM_CAPI_BRIDGE_ADMIN_KUBECONFIG=$ADMIN_KUBECONFIG
MAGNUM_CAPI_BRIDGE_KUBECONFIG=$MCB_MGMT_DIR/bridge.kubeconfig MAGNUM_CAPI_BRIDGE_KUBECTL=$kubectl
. "$root/deploy/devstack/settings"
. "$root/deploy/devstack/plugin.sh"
configure_magnum_capi_bridge_kubernetes
echo "$MAGNUM_CAPI_BRIDGE_KUBECONFIG"
