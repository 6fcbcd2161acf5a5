#!/usr/bin/env bash
# Brings up the local Kubernetes management cluster with Cluster API, without Docker:
# etcd (embedded) + kube-apiserver + kube-controller-manager (GC and namespace controllers only) +
# the CAPI core, KubeadmControlPlane, kubeadm bootstrap and CAPD managers, whose in-memory backend
# fakes the workload clusters' machines. Idempotent: components already running with the same binary
# and flags are left alone, changed ones are restarted, data and PKI are kept across runs.
#
#   deploy/local/mgmt-up.sh && export KUBECONFIG=$(deploy/local/mgmt-kubeconfig.sh)
#
# State/PKI: /var/lib/magnum-capi-bridge/mgmt, PID files: /var/lib/magnum-capi-bridge/run,
# logs: /var/log/magnum-capi-bridge (MCB_MGMT_DIR, MCB_RUN_DIR, MCB_LOG_DIR override them; lib.sh).
# MCB_SKIP_BUILD=1 skips the (cached) build check.
#
# Everything listens on 127.0.0.1 except what CAPD cannot be told otherwise: the managers' webhook
# servers (controller-runtime's webhook host is not a flag), CAPD's in-memory debug server on the
# fixed :19000 and the fake workload API servers on :20000-30000. So run one stack per machine or
# network namespace; clients only ever use 127.0.0.1.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
log_prefix="mgmt: "
root=$(cd "$mcb_local_dir/../.." && pwd)

now_ms() { date +%s%3N; }
t_start=$(now_ms)
step_start=$t_start
step_done() { # <what>: logs how long the step since the previous call took
  local t
  t=$(now_ms)
  log "$1 ($((t - step_start))ms)"
  step_start=$t
}

mgmt_lock
mkdir -p "$MCB_RUN_DIR" "$MCB_LOG_DIR" "$MCB_MGMT_DIR"
chmod 700 "$MCB_MGMT_DIR"

# --- binaries ---------------------------------------------------------------------------------
if [ "${MCB_SKIP_BUILD:-0}" != 1 ]; then
  if ! "$mcb_local_dir/build-k8s.sh" >>"$MCB_LOG_DIR/build-k8s.log" 2>&1; then
    tail -n 30 "$MCB_LOG_DIR/build-k8s.log" >&2
    die "building the binaries failed (log: $MCB_LOG_DIR/build-k8s.log)"
  fi
fi
for b in etcd kube-apiserver kube-controller-manager capi-manager kcp-manager cabpk-manager capd-manager capi-install; do
  [ -x "$MCB_BIN_DIR/$b" ] || die "$MCB_BIN_DIR/$b missing (run deploy/local/build-k8s.sh)"
done
step_done "binaries ready in $MCB_BIN_DIR"

# --- PKI --------------------------------------------------------------------------------------
# One CA signs the serving certificate (apiserver, KCM and all webhooks, which clients reach as
# 127.0.0.1) and the admin client certificate. The CA carries keyCertSign in a critical keyUsage:
# Python >= 3.13 clients reject CAs without it.
write_openssl_config() {
  cat >"$MCB_PKI_DIR/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[v3_serving]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1, IP:::1, IP:10.0.0.1, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
[v3_client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
}

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }

# issue <name> <subject> <extensions-section>: key + certificate signed by the CA, valid 825 days.
issue() {
  local name=$1 subj=$2 ext=$3
  new_key "$MCB_PKI_DIR/$name.key.tmp"
  openssl req -new -config "$MCB_PKI_DIR/openssl.cnf" -key "$MCB_PKI_DIR/$name.key.tmp" -subj "$subj" |
    openssl x509 -req -CA "$MCB_PKI_DIR/ca.crt" -CAkey "$MCB_PKI_DIR/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 825 -sha256 -extfile "$MCB_PKI_DIR/openssl.cnf" -extensions "$ext" -out "$MCB_PKI_DIR/$name.crt.tmp" 2>/dev/null
  mv "$MCB_PKI_DIR/$name.key.tmp" "$MCB_PKI_DIR/$name.key"
  mv "$MCB_PKI_DIR/$name.crt.tmp" "$MCB_PKI_DIR/$name.crt"
  log "issued $name certificate ($subj)"
}

# fresh <cert>: exists and is valid for at least another 30 days.
fresh() { [ -s "$1" ] && openssl x509 -in "$1" -noout -checkend $((30 * 86400)) >/dev/null 2>&1; }

ensure_pki() {
  mkdir -p "$MCB_PKI_DIR/webhook"
  chmod 700 "$MCB_PKI_DIR"
  write_openssl_config
  if ! [ -s "$MCB_PKI_DIR/ca.key" ] || ! fresh "$MCB_PKI_DIR/ca.crt"; then
    new_key "$MCB_PKI_DIR/ca.key"
    openssl req -x509 -new -config "$MCB_PKI_DIR/openssl.cnf" -extensions v3_ca -key "$MCB_PKI_DIR/ca.key" \
      -subj "/CN=magnum-capi-bridge management CA" -days 3650 -sha256 -out "$MCB_PKI_DIR/ca.crt"
    rm -f "$MCB_PKI_DIR/serving.crt" "$MCB_PKI_DIR/admin.crt" # signed by the old CA
    log "created CA"
  fi
  fresh "$MCB_PKI_DIR/serving.crt" || issue serving "/CN=127.0.0.1" v3_serving
  fresh "$MCB_PKI_DIR/admin.crt" || issue admin "/O=system:masters/CN=magnum-capi-bridge-admin" v3_client
  # The bridge's token webhook serves HTTPS with its own certificate (127.0.0.1), not the apiserver's key.
  fresh "$MCB_PKI_DIR/token-webhook.crt" || issue token-webhook "/CN=magnum-capi-bridge token webhook" v3_serving
  # The managers read tls.crt/tls.key from --webhook-cert-dir.
  cmp -s "$MCB_PKI_DIR/serving.crt" "$MCB_PKI_DIR/webhook/tls.crt" || cp "$MCB_PKI_DIR/serving.crt" "$MCB_PKI_DIR/webhook/tls.crt"
  cmp -s "$MCB_PKI_DIR/serving.key" "$MCB_PKI_DIR/webhook/tls.key" || install -m 600 "$MCB_PKI_DIR/serving.key" "$MCB_PKI_DIR/webhook/tls.key"
  if ! [ -s "$MCB_PKI_DIR/sa.key" ] || ! [ -s "$MCB_PKI_DIR/sa.pub" ]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$MCB_PKI_DIR/sa.key" 2>/dev/null
    chmod 600 "$MCB_PKI_DIR/sa.key"
    openssl pkey -in "$MCB_PKI_DIR/sa.key" -pubout -out "$MCB_PKI_DIR/sa.pub"
    log "created service-account key pair"
  fi
}
ensure_pki
step_done "PKI ready in $MCB_PKI_DIR"

# --- processes --------------------------------------------------------------------------------
# same_binary <pid> <path>: the process runs the file at path, or a file it replaced with the same
# bytes (build-k8s.sh relinks the managers, reproducibly, whenever tools/k8s/capi changes).
same_binary() {
  local exe
  exe=$(readlink "/proc/$1/exe") || return 1
  [ "$exe" = "$2" ] || { [ "$exe" = "$2 (deleted)" ] && cmp -s "/proc/$1/exe" "$2"; }
}

# ensure_running <component> <VAR=value … | -> -- <args…>: leaves a running instance alone when
# it runs the current binary with the same arguments; otherwise (re)starts it detached.
ensure_running() {
  local name=$1 bin pid
  shift
  local envs=()
  while [ "$1" != -- ]; do
    [ "$1" = - ] || envs+=("$1")
    shift
  done
  shift
  bin=$MCB_BIN_DIR/$(component_binary "$name")
  if pid=$(component_pid "$name"); then
    if same_binary "$pid" "$bin" &&
      [ "$(tr '\0' '\n' <"/proc/$pid/cmdline")" = "$(printf '%s\n' "$bin" "$@")" ]; then
      return 0
    fi
    log "restarting $name: binary or flags changed"
    stop_component "$name"
  fi
  # setsid: the process outlives this script and its session; 9>&- keeps the lock from leaking.
  env "${envs[@]}" setsid "$bin" "$@" >>"$MCB_LOG_DIR/$name.log" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$MCB_RUN_DIR/$name.pid"
  log "started $name (pid $pid, log $MCB_LOG_DIR/$name.log)"
}

# wait_ready <component> <url> <timeout-seconds> [curl options…]
wait_ready() {
  local name=$1 url=$2 timeout=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until curl -sf -o /dev/null --max-time 2 "$@" "$url"; do
    if ! component_pid "$name" >/dev/null; then
      log "$name is not running; last lines of $MCB_LOG_DIR/$name.log:"
      tail -n 20 "$MCB_LOG_DIR/$name.log" >&2
      exit 1
    fi
    [ $SECONDS -lt $deadline ] || die "$name not ready at $url after ${timeout}s (log: $MCB_LOG_DIR/$name.log)"
    sleep 0.1
  done
}

tls=(--cacert "$MCB_PKI_DIR/ca.crt" --cert "$MCB_PKI_DIR/admin.crt" --key "$MCB_PKI_DIR/admin.key")

ensure_running etcd - -- \
  --name=local --data-dir="$MCB_MGMT_DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync --quota-backend-bytes=4294967296
wait_ready etcd "http://127.0.0.1:$ETCD_CLIENT_PORT/health" 60
step_done "etcd ready on 127.0.0.1:$ETCD_CLIENT_PORT"

# ServiceAccount admission is off: no token controller runs, and nothing here needs pod tokens.
# Keystone tokens: the apiserver asks the zed bridge's webhook (TokenReview v1) about any bearer token
# that neither its ServiceAccount tokens nor client certificates explain, and caches the answer 10 s
# (the bridge caches its Keystone validation 5 s more), so a revoked token is refused within ~15 s.
write_token_webhook_kubeconfig() {
  local tmp=$TOKEN_WEBHOOK_KUBECONFIG.tmp
  cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: magnum-capi-bridge-token-webhook
  cluster:
    server: https://127.0.0.1:$TOKEN_WEBHOOK_PORT/tokenreview
    certificate-authority: $MCB_PKI_DIR/ca.crt
users:
- name: kube-apiserver
  user: {}
contexts:
- name: webhook
  context:
    cluster: magnum-capi-bridge-token-webhook
    user: kube-apiserver
current-context: webhook
EOF
  if cmp -s "$tmp" "$TOKEN_WEBHOOK_KUBECONFIG"; then rm -f "$tmp"; else mv "$tmp" "$TOKEN_WEBHOOK_KUBECONFIG"; fi
}
write_token_webhook_kubeconfig

ensure_running kube-apiserver - -- \
  --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
  --tls-cert-file="$MCB_PKI_DIR/serving.crt" --tls-private-key-file="$MCB_PKI_DIR/serving.key" \
  --client-ca-file="$MCB_PKI_DIR/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$MCB_PKI_DIR/sa.pub" --service-account-signing-key-file="$MCB_PKI_DIR/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 --authorization-mode=RBAC --allow-privileged=true \
  --disable-admission-plugins=ServiceAccount --enable-priority-and-fairness=false --profiling=false \
  --authentication-token-webhook-config-file="$TOKEN_WEBHOOK_KUBECONFIG" --authentication-token-webhook-version=v1 \
  --authentication-token-webhook-cache-ttl=10s
wait_ready kube-apiserver "https://127.0.0.1:$APISERVER_PORT/readyz" 120 "${tls[@]}"
step_done "kube-apiserver ready on 127.0.0.1:$APISERVER_PORT"

write_kubeconfig() {
  local tmp=$ADMIN_KUBECONFIG.tmp
  (
    umask 077
    cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: magnum-capi-bridge-mgmt
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$MCB_PKI_DIR/ca.crt")
users:
- name: magnum-capi-bridge-admin
  user:
    client-certificate-data: $(base64 -w0 <"$MCB_PKI_DIR/admin.crt")
    client-key-data: $(base64 -w0 <"$MCB_PKI_DIR/admin.key")
contexts:
- name: magnum-capi-bridge-mgmt
  context:
    cluster: magnum-capi-bridge-mgmt
    user: magnum-capi-bridge-admin
current-context: magnum-capi-bridge-mgmt
EOF
  )
  if cmp -s "$tmp" "$ADMIN_KUBECONFIG"; then rm -f "$tmp"; else mv "$tmp" "$ADMIN_KUBECONFIG"; fi
}
write_kubeconfig

# Only the garbage collector (ownerReference cascades: a deleted Cluster's Secrets), the namespace
# controller (namespace deletion) and the resource quota controller (it computes the usage of each
# project's ResourceQuota; without it the apiserver enforces nothing) are needed; no pods ever run here.
ensure_running kube-controller-manager - -- \
  --kubeconfig="$ADMIN_KUBECONFIG" --controllers=garbage-collector-controller,namespace-controller,resourcequota-controller \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
  --tls-cert-file="$MCB_PKI_DIR/serving.crt" --tls-private-key-file="$MCB_PKI_DIR/serving.key" \
  --authentication-skip-lookup=true
wait_ready kube-controller-manager "https://127.0.0.1:$KCM_PORT/healthz" 60 --cacert "$MCB_PKI_DIR/ca.crt"
step_done "kube-controller-manager ready on 127.0.0.1:$KCM_PORT"

# --- CRDs and webhook configurations ------------------------------------------------------------
# The providers' config/ folders come from the module cache of the tools module that built the
# managers, so CRDs and binaries are always the same version.
mapfile -t moddirs < <(cd "$root/tools/k8s/capi" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test)
if [ "${#moddirs[@]}" != 2 ] || ! [ -d "${moddirs[0]}" ] || ! [ -d "${moddirs[1]}" ]; then
  die "cluster-api modules not in the module cache (run: cd tools/k8s/capi && go mod download)"
fi
capi_mod=${moddirs[0]} capi_test_mod=${moddirs[1]}
port_of() { local m; for m in "${CAPI_MANAGERS[@]}"; do [ "${m%%:*}" = "$1" ] && { IFS=: read -r _ wh _ _ <<<"$m"; echo "$wh"; }; done; }
"$MCB_BIN_DIR/capi-install" -kubeconfig "$ADMIN_KUBECONFIG" -ca-bundle "$MCB_PKI_DIR/ca.crt" \
  -provider "config=$capi_mod/core/config,port=$(port_of capi)" \
  -provider "config=$capi_mod/controlplane/kubeadm/config,port=$(port_of kcp)" \
  -provider "config=$capi_mod/bootstrap/kubeadm/config,port=$(port_of cabpk)" \
  -provider "config=$capi_test_mod/infrastructure/docker/config,port=$(port_of capd)" \
  >>"$MCB_LOG_DIR/capi-install.log" 2>&1 || {
  tail -n 20 "$MCB_LOG_DIR/capi-install.log" >&2
  die "capi-install failed (log: $MCB_LOG_DIR/capi-install.log)"
}
step_done "CAPI $CAPI_VERSION CRDs and webhook configurations applied"

# --- Cluster API managers -------------------------------------------------------------------------
# MachineTaintPropagation: the in-memory flavor puts a node group's node_taints on its Machines
# (topology taints) and the core manager copies them to the Nodes (kubelet flags do not exist there).
# The gate is set on every manager so their webhooks agree. --additional-sync-machine-labels: the core
# manager copies only a few label domains from Machines to Nodes by default; node_labels have any key.
for m in "${CAPI_MANAGERS[@]}"; do
  IFS=: read -r name webhook health diag <<<"$m"
  envs=(-)
  extra=()
  # CAPD puts POD_IP into the in-memory clusters' control-plane endpoints; clients use 127.0.0.1.
  [ "$name" = capd ] && envs=(POD_IP=127.0.0.1)
  [ "$name" = capi ] && extra=("--additional-sync-machine-labels=.*")
  ensure_running "$name" "${envs[@]}" -- \
    --kubeconfig="$ADMIN_KUBECONFIG" --webhook-cert-dir="$MCB_PKI_DIR/webhook" --webhook-port="$webhook" \
    --health-addr="127.0.0.1:$health" --diagnostics-address="127.0.0.1:$diag" --insecure-diagnostics \
    --feature-gates=ClusterTopology=true,MachineTaintPropagation=true "${extra[@]}" --v=1
done
for m in "${CAPI_MANAGERS[@]}"; do
  IFS=: read -r name webhook health diag <<<"$m"
  wait_ready "$name" "http://127.0.0.1:$health/readyz" 120
done
step_done "CAPI managers ready (webhooks on ports 19443-19446)"

log "management cluster up in $(( $(now_ms) - t_start ))ms; kubeconfig: $ADMIN_KUBECONFIG"
