# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this
# Shared by mgmt-up.sh, mgmt-down.sh, mgmt-status.sh and mgmt-kubeconfig.sh: where the local
# management cluster keeps its state, which ports it uses, and how its processes are tracked.
# Every process is a plain binary on 127.0.0.1, started detached (setsid) with a PID file; a PID file
# is trusted only while /proc/<pid>/exe is still the binary we started, so a recycled PID is never
# signalled.

mgmt_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$mgmt_here/versions.env"

MCB_CACHE=${MCB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/magnum-capi-bridge}
BIN_DIR=$MCB_CACHE/bin
RUN_DIR=${MCB_RUN_DIR:-/var/lib/magnum-capi-bridge/run}
LOG_DIR=${MCB_LOG_DIR:-/var/log/magnum-capi-bridge}
STATE_DIR=${MCB_STATE_DIR:-/var/lib/magnum-capi-bridge/mgmt}
PKI_DIR=$STATE_DIR/pki
ADMIN_KUBECONFIG=$STATE_DIR/admin.kubeconfig

# Ports (all on 127.0.0.1; see shared/reference/k8s-local.md for the ones CAPD binds on all interfaces).
APISERVER_PORT=16443
# The zed bridge's Keystone token webhook (docs/tenant-view.md), which the apiserver asks about bearer
# tokens no other authenticator knows; bridge-up.sh serves it with the token-webhook certificate.
TOKEN_WEBHOOK_PORT=9514
TOKEN_WEBHOOK_KUBECONFIG=$STATE_DIR/token-webhook.kubeconfig
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23791
KCM_PORT=10257
# name:webhook-port:health-port:diagnostics-port for the Cluster API managers, in start order.
CAPI_MANAGERS=(capi:19443:19540:19640 kcp:19444:19541:19641 cabpk:19445:19542:19642 capd:19446:19543:19643)

# binary_of <component> → file name in $BIN_DIR.
binary_of() {
  case $1 in
    etcd | kube-apiserver | kube-controller-manager) echo "$1" ;;
    capi | kcp | cabpk | capd) echo "$1-manager" ;;
    *) echo "unknown component $1" >&2; return 1 ;;
  esac
}

log() { printf '%s mgmt: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# alive <pid>: the process exists and is not a zombie waiting to be reaped.
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# pid_of <component>: prints the PID from the PID file if that process is alive and runs our
# binary (also after a rebuild replaced the file, when the kernel reports "<path> (deleted)").
pid_of() {
  local name=$1 pid exe
  pid=$(cat "$RUN_DIR/$name.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "${exe% (deleted)}" = "$BIN_DIR/$(binary_of "$name")" ] || return 1
  echo "$pid"
}

# stop_component <component> [timeout-seconds]: SIGTERM, then SIGKILL after the timeout.
stop_component() {
  local name=$1 timeout=${2:-${MCB_STOP_TIMEOUT:-10}} pid deadline
  if ! pid=$(pid_of "$name"); then
    rm -f "$RUN_DIR/$name.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + timeout))
  while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if alive "$pid"; then
    log "$name (pid $pid) ignored SIGTERM for ${timeout}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$RUN_DIR/$name.pid"
  log "stopped $name (pid $pid)"
}

# lock: one mgmt-up/mgmt-down at a time (fd 9 stays open until the script exits).
lock() {
  mkdir -p "$RUN_DIR"
  exec 9>"$RUN_DIR/mgmt.lock"
  flock -w 900 9 || die "another mgmt-up/mgmt-down holds $RUN_DIR/mgmt.lock"
}
