#!/usr/bin/env bash
# (Re)starts a bridge instance against the local stack. It reads the same magnum.conf as its
# magnum-api plus its own section in $MCB_ETC_DIR/<instance>.conf. A running bridge whose binary or
# configuration changed is restarted; otherwise this is a no-op.
#
# Usage: [BRIDGE_REPLICAS=N] bridge-up.sh [zed|newest]
#   zed (default)  magnum-api 15.0.1: /etc/magnum/magnum.conf, namespaces magnum-<project>,
#                  PID file $MCB_RUN_DIR/bridge.pid, log $MCB_LOG_DIR/bridge.log, metrics and health on
#                  127.0.0.1:9590 (/metrics, /healthz, /readyz)
#   newest         magnum-api 23.0.0 in the forky chroot (openstack/newest-up.sh): its magnum.conf
#                  (vhost magnum-new, database magnum_new), namespaces magnum23-<project>,
#                  PID file $MCB_RUN_DIR/bridge-newest.pid, log $MCB_LOG_DIR/bridge-newest.log, 127.0.0.1:9591
# The two instances share the management cluster; distinct namespace prefixes keep their objects apart.
# BRIDGE_REPLICAS=N (default 1) runs N replicas per instance, as operators run a conductor per
# controller: replica r > 1 is <name>-r ([DEFAULT] host <hostname>-<name>-r, its own magnum_service
# row) listening on port + 2(r-1) (zed 9590, 9592, 9594…; newest 9591, 9593…). They consume the same
# queues; a Lease (magnum-capi-bridge/magnum-capi-bridge-<prefix>) elects the one that runs the
# status sync. Replicas above N left from an earlier run are stopped.
# BRIDGE_BINS="bin1 bin2 …" runs replica r from the r-th binary (the last one for the replicas after
# it), e.g. the previous release's (previous-release.sh) next to this tree's during a rolling upgrade;
# default: this tree's bin/magnum-capi-bridge.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
ensure_dirs
replicas=${BRIDGE_REPLICAS:-1}
[[ $replicas =~ ^[1-9][0-9]?$ ]] || { echo "BRIDGE_REPLICAS must be 1-99, not '$replicas'" >&2; exit 2; }
case ${1:-zed} in
zed)
  # Templates may choose OpenStack machines (capi_infrastructure=openstack): CAPO (capo-up.sh)
  # reconciles them against the OpenStack simulator. The newest instance offers only the in-memory
  # machines, as a production cloud offers only its own: a template asking for another is refused.
  name=bridge magnum_conf=/etc/magnum/magnum.conf prefix=magnum- release="" port=9590 views=1 allowed=inmemory,openstack
  ;;
newest)
  # Only NEWEST_ROOT: stack.env exports every setting of the OpenStack half, which the bridge need not inherit.
  newest_root=$(. "$here/openstack/stack.env" && echo "$NEWEST_ROOT")
  name=bridge-newest magnum_conf=$newest_root/etc/magnum/magnum.conf prefix=magnum23- release=23 port=9591 views=0 allowed=inmemory
  [ -s "$magnum_conf" ] || { log "no $magnum_conf: run deploy/local/openstack/newest-up.sh first"; exit 1; }
  ;;
*)
  echo "usage: $0 [zed|newest]" >&2; exit 2
  ;;
esac
# BRIDGE_ALLOWED_INFRASTRUCTURES: another list of flavors (the upgrade test offers both on newest).
allowed=${BRIDGE_ALLOWED_INFRASTRUCTURES:-$allowed}
bin=$root/bin/magnum-capi-bridge
read -r -a bins <<<"${BRIDGE_BINS:-$bin}"
for b in "${bins[@]}"; do
  [ "$b" != "$bin" ] || [ -x "$bin" ] || (cd "$root" && make -s build)
  [ -x "$b" ] || { echo "BRIDGE_BINS: no executable $b" >&2; exit 2; }
done
# The devstack plugin's own functions install, configure and start the bridge (deploy/devstack),
# with stand-ins for the few devstack functions they call (lib.sh's use_devstack_shims); its log lines
# name them.
use_devstack_shims
MAGNUM_CAPI_BRIDGE_DIR=$root MAGNUM_CAPI_BRIDGE_BUILD=False MAGNUM_CAPI_BRIDGE_BIN=${bins[0]} PYTHON=/usr/bin/python3
MAGNUM_CAPI_BRIDGE_MAGNUM_CONF=$magnum_conf
# The bridge's own ServiceAccount (deploy/kubernetes/rbac.yaml), not the management cluster's admin.
MAGNUM_CAPI_BRIDGE_ADMIN_KUBECONFIG=$ADMIN_KUBECONFIG MAGNUM_CAPI_BRIDGE_KUBECONFIG=$MCB_MGMT_DIR/bridge.kubeconfig
MAGNUM_CAPI_BRIDGE_KUBECTL=$MCB_BIN_DIR/kubectl
MAGNUM_CAPI_BRIDGE_NAMESPACE_PREFIX=$prefix MAGNUM_CAPI_BRIDGE_INFRASTRUCTURE=inmemory MAGNUM_CAPI_BRIDGE_ALLOWED_INFRASTRUCTURES=$allowed
MAGNUM_CAPI_BRIDGE_KUBERNETES_VERSION=$DEFAULT_WORKLOAD_K8S_VERSION MAGNUM_CAPI_BRIDGE_MAGNUM_RELEASE=$release
. "$root/deploy/devstack/settings"
. "$root/deploy/devstack/plugin.sh"

install_magnum_capi_bridge
configure_magnum_capi_bridge_kubernetes
base=$name instance=${1:-zed}

# apply_tenant_api_webhook: registers the tenant API's admission webhook (docs/tenant-api.md), which the
# zed bridge serves on its token webhook's listener (HTTPS, the token-webhook certificate, signed by the
# management CA): the apiserver sends it every MagnumCluster create and update. The chart's
# ValidatingWebhookConfiguration (tenantAPI.enabled), with a URL instead of a Service: the bridge runs
# on this host. Server-side applied, so running it again changes nothing.
apply_tenant_api_webhook() {
  if ! [ -s "$MCB_PKI_DIR/ca.crt" ] || ! [ -s "$MCB_PKI_DIR/token-webhook.crt" ]; then
    log "no $MCB_PKI_DIR/ca.crt or token-webhook.crt (an older mgmt-up.sh): the tenant API's admission webhook is not registered"
    return 0
  fi
  local ca
  ca=$(base64 -w0 <"$MCB_PKI_DIR/ca.crt")
  "$MAGNUM_CAPI_BRIDGE_KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout=30s apply --server-side \
    --field-manager=magnum-capi-bridge-deploy --force-conflicts -f - >/dev/null <<WEBHOOK
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: magnum-capi-bridge-tenant-api
  labels:
    app.kubernetes.io/name: magnum-capi-bridge
webhooks:
  - name: magnumclusters.coe.magnum.openstack.org
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 10
    matchPolicy: Equivalent
    rules:
      - apiGroups: [coe.magnum.openstack.org]
        apiVersions: ["*"]
        operations: [CREATE, UPDATE]
        resources: [magnumclusters]
        scope: Namespaced
    clientConfig:
      url: https://127.0.0.1:$TOKEN_WEBHOOK_PORT/validate/magnumclusters
      caBundle: $ca
WEBHOOK
  log "tenant API admission webhook: https://127.0.0.1:$TOKEN_WEBHOOK_PORT/validate/magnumclusters (ValidatingWebhookConfiguration magnum-capi-bridge-tenant-api)"
}
[ "$views" != 1 ] || apply_tenant_api_webhook

# start_replica R: (re)starts replica R of this instance, as the plugin's service <name>[-R].
start_replica() {
  local r=$1 name=$base bind=127.0.0.1:$((port + 2 * ($1 - 1)))
  [ "$r" = 1 ] || name=$base-$r
  local conf=$MCB_ETC_DIR/$name.conf bin=${bins[$(($1 - 1))]:-${bins[-1]}}
  MAGNUM_CAPI_BRIDGE_BIN=$bin MAGNUM_CAPI_BRIDGE_SERVICE=$name MAGNUM_CAPI_BRIDGE_CONF=$conf MAGNUM_CAPI_BRIDGE_HOST=$(hostname)-$name
  cat > "$conf.new" <<CONF
# Written by deploy/local/bridge-up.sh ${instance} with the devstack plugin's configure_magnum_capi_bridge.
# Per-cluster Keystone application credentials are issued as the requesting user and deleted with the
# cluster, even though in-memory machines call no cloud: the local stack exercises their lifecycle.
CONF
  configure_magnum_capi_bridge "$conf.new"
  # Prometheus metrics, /healthz and /readyz (docs/metrics.md).
  iniset "$conf.new" bridge metrics_bind "$bind"
  if [ "$views" = 1 ] && [ "$r" = 1 ]; then
    # The tenant view (docs/tenant-view.md): Keystone tokens read their project's namespace through the
    # token webhook that mgmt-up.sh points the apiserver at (HTTPS, the token-webhook certificate), and
    # the discovery document (docs/discovery.md). Short caches, so that tests see a revoked token or a
    # new flavor within seconds. One replica serves them (their ports are fixed).
    iniset "$conf.new" bridge tenant_view true
    # The tenant API (docs/tenant-api.md): MagnumClusters in project namespaces, validated at admission
    # by the same listener (apply_tenant_api_webhook registers it).
    iniset "$conf.new" bridge tenant_api true
    # The catalog lists both magnum-apis, one per region: this bridge's is the zed one's.
    iniset "$conf.new" bridge tenant_api_region_name "$(. "$here/openstack/stack.env" && echo "$MCB_REGION")"
    iniset "$conf.new" bridge token_webhook_bind "127.0.0.1:$TOKEN_WEBHOOK_PORT"
    iniset "$conf.new" bridge tenant_view_cache_ttl 5
    iniset "$conf.new" bridge discovery_bind 127.0.0.1:9513
    iniset "$conf.new" bridge discovery_cache_ttl 5
    if [ -s "$MCB_PKI_DIR/token-webhook.crt" ]; then
      iniset "$conf.new" bridge token_webhook_cert_file "$MCB_PKI_DIR/token-webhook.crt"
      iniset "$conf.new" bridge token_webhook_key_file "$MCB_PKI_DIR/token-webhook.key"
    else
      log "no $MCB_PKI_DIR/token-webhook.crt (an older mgmt-up.sh): the token webhook serves plain HTTP on 127.0.0.1"
    fi
  fi
  # BRIDGE_EXTRA_CONFIG: more [bridge] lines (e.g. the fault stage's short update_timeout), appended to
  # [bridge], the file's last section; a change restarts the bridge, and running bridge-up.sh again
  # without it restores the default.
  [ -z "${BRIDGE_EXTRA_CONFIG:-}" ] || printf '%s\n' "$BRIDGE_EXTRA_CONFIG" >> "$conf.new"
  local stamp
  stamp=$( (sha256sum "$bin" "$magnum_conf" "$conf.new") | sha256sum | cut -c1-16)
  if pid_alive "$name" && [ "$(cat "$MCB_RUN_DIR/$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    log "$name already running (pid $(cat "$MCB_RUN_DIR/$name.pid")); metrics http://$bind/metrics, health http://$bind/healthz, http://$bind/readyz"
    rm -f "$conf.new"; return 0
  fi
  mv "$conf.new" "$conf"
  stop_magnum_capi_bridge
  log "starting $name"
  # The log is appended to: the wait below looks for this start's "serving" only.
  local seen=0
  [ ! -e "$MCB_LOG_DIR/$name.log" ] || seen=$(wc -l <"$MCB_LOG_DIR/$name.log")
  # --check-config first (it names the first dependency that fails), then run_process.
  start_magnum_capi_bridge
  echo "$stamp" > "$MCB_RUN_DIR/$name.stamp"
  wait_for "$name's heartbeat" 30 bash -c "tail -n +$((seen + 1)) '$MCB_LOG_DIR/$name.log' | grep -q 'serving'"
  log "$name running (pid $(cat "$MCB_RUN_DIR/$name.pid")), log $MCB_LOG_DIR/$name.log; metrics http://$bind/metrics, health http://$bind/healthz, http://$bind/readyz"
}

for r in $(seq 1 "$replicas"); do start_replica "$r"; done
# Replicas of an earlier, larger BRIDGE_REPLICAS.
for f in "$MCB_RUN_DIR/$base"-[0-9]*.pid; do
  [ -e "$f" ] || continue
  r=${f##*/"$base"-}; r=${r%.pid}
  if [[ $r =~ ^[0-9]+$ ]] && [ "$r" -gt "$replicas" ]; then
    log "stopping $base-$r (BRIDGE_REPLICAS=$replicas)"; stop_pid "$base-$r" 30
  fi
done
