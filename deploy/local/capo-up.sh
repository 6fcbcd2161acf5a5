#!/usr/bin/env bash
# Adds Cluster API Provider OpenStack (CAPO) to the running local management cluster: CAPO's and
# ORC's CRDs (CAPO v0.14 needs the openstack-resource-controller CRDs to start), CAPO's webhook
# configurations, and the CAPO manager as a local process. Nothing here talks to an OpenStack cloud:
# the stack is for validating OpenStack-flavor objects (server-side dry runs, ClusterClass
# reconciliation), so never create an OpenStackCluster or a Cluster that uses it for real.
# Idempotent like mgmt-up.sh: a manager running the current binary with the same flags is left alone.
#
#   deploy/local/mgmt-up.sh && deploy/local/capo-up.sh
#
# Needs the management cluster up (mgmt-up.sh); MCB_SKIP_BUILD=1 skips the (cached) build check.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
log_prefix="mgmt: "
root=$(cd "$mcb_local_dir/../.." && pwd)

# CAPO's ports: webhook, health, diagnostics (next to the CAPI managers' 19443-19446/19540-19543/19640-19643).
CAPO_WEBHOOK_PORT=19447
CAPO_HEALTH_PORT=19544
CAPO_DIAGNOSTICS_PORT=19644

mgmt_lock
mkdir -p "$MCB_RUN_DIR" "$MCB_LOG_DIR"

component_pid kube-apiserver >/dev/null || die "the management cluster is not running (start it with deploy/local/mgmt-up.sh)"
tls=(--cacert "$MCB_PKI_DIR/ca.crt" --cert "$MCB_PKI_DIR/admin.crt" --key "$MCB_PKI_DIR/admin.key")
curl -sf -o /dev/null --max-time 5 "${tls[@]}" "https://127.0.0.1:$APISERVER_PORT/readyz" ||
  die "kube-apiserver on 127.0.0.1:$APISERVER_PORT is not ready"

if [ "${MCB_SKIP_BUILD:-0}" != 1 ]; then
  if ! "$mcb_local_dir/build-k8s.sh" capo >>"$MCB_LOG_DIR/build-k8s.log" 2>&1; then
    tail -n 30 "$MCB_LOG_DIR/build-k8s.log" >&2
    die "building capo-manager failed (log: $MCB_LOG_DIR/build-k8s.log)"
  fi
fi
for b in capo-manager capi-install; do
  [ -x "$MCB_BIN_DIR/$b" ] || die "$MCB_BIN_DIR/$b missing (run deploy/local/build-k8s.sh capi capo)"
done

# CRDs and webhooks come from the module cache of the module that built the manager, so they match.
mapfile -t moddirs < <(cd "$root/tools/k8s/capo" &&
  go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api-provider-openstack github.com/k-orc/openstack-resource-controller/v2)
if [ "${#moddirs[@]}" != 2 ] || ! [ -d "${moddirs[0]}" ] || ! [ -d "${moddirs[1]}" ]; then
  die "CAPO/ORC modules not in the module cache (run: cd tools/k8s/capo && go mod download)"
fi
capo_mod=${moddirs[0]} orc_mod=${moddirs[1]}
# CAPO's default kustomization sets the provider label through commonLabels, which capi-install
# does not read, so the name is given here.
"$MCB_BIN_DIR/capi-install" -kubeconfig "$ADMIN_KUBECONFIG" -ca-bundle "$MCB_PKI_DIR/ca.crt" \
  -provider "config=$capo_mod/config,port=$CAPO_WEBHOOK_PORT,name=infrastructure-openstack" \
  -provider "name=orc,crds=$orc_mod/config/crd/bases,webhooks=none" \
  >>"$MCB_LOG_DIR/capi-install.log" 2>&1 || {
  tail -n 20 "$MCB_LOG_DIR/capi-install.log" >&2
  die "capi-install of CAPO failed (log: $MCB_LOG_DIR/capi-install.log)"
}
log "CAPO and ORC CRDs and CAPO's webhook configurations applied"

bin=$MCB_BIN_DIR/capo-manager
args=(--kubeconfig="$ADMIN_KUBECONFIG" --webhook-cert-dir="$MCB_PKI_DIR/webhook" --webhook-port="$CAPO_WEBHOOK_PORT"
  --health-addr="127.0.0.1:$CAPO_HEALTH_PORT" --diagnostics-address="127.0.0.1:$CAPO_DIAGNOSTICS_PORT"
  --insecure-diagnostics --v=1)
running=false
if pid=$(component_pid capo); then
  exe=$(readlink "/proc/$pid/exe")
  if { [ "$exe" = "$bin" ] || { [ "$exe" = "$bin (deleted)" ] && cmp -s "/proc/$pid/exe" "$bin"; }; } &&
    [ "$(tr '\0' '\n' <"/proc/$pid/cmdline")" = "$(printf '%s\n' "$bin" "${args[@]}")" ]; then
    running=true
  else
    log "restarting capo: binary or flags changed"
    stop_component capo
  fi
fi
if ! $running; then
  # setsid: the manager outlives this script; 9>&- keeps the lock from leaking into it.
  setsid "$bin" "${args[@]}" >>"$MCB_LOG_DIR/capo.log" 2>&1 </dev/null 9>&- &
  echo $! >"$MCB_RUN_DIR/capo.pid"
  log "started capo (pid $!, log $MCB_LOG_DIR/capo.log)"
fi

deadline=$((SECONDS + 120))
until curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$CAPO_HEALTH_PORT/readyz"; do
  if ! component_pid capo >/dev/null; then
    log "capo is not running; last lines of $MCB_LOG_DIR/capo.log:"
    tail -n 20 "$MCB_LOG_DIR/capo.log" >&2
    exit 1
  fi
  [ $SECONDS -lt $deadline ] || die "capo not ready after 120s (log: $MCB_LOG_DIR/capo.log)"
  sleep 0.2
done
log "CAPO manager ready (webhooks on port $CAPO_WEBHOOK_PORT)"
