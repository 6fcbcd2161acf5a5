#!/usr/bin/env bash
# Stops the local management cluster that mgmt-up.sh started, and only that: each process is found
# through its PID file and signalled only if it still runs our binary. Order: the controllers
# (CAPI managers and kube-controller-manager, in parallel), then kube-apiserver, then etcd — the
# apiserver ignores SIGTERM for good once etcd is gone. SIGKILL after MCB_STOP_TIMEOUT (10 s).
# Data, PKI and the kubeconfig are kept; mgmt-up.sh brings the same cluster back.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
log_prefix="mgmt: "

mgmt_lock
t0=$(date +%s%3N)
pids=()
for c in capd cabpk kcp capi kube-controller-manager; do
  stop_component "$c" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
stop_component kube-apiserver
stop_component etcd
log "management cluster stopped in $(( $(date +%s%3N) - t0 ))ms (data kept in $MCB_MGMT_DIR)"
exit $rc
