# shellcheck shell=bash disable=SC2034 # its variables are read by the scripts that source it
# The one library of the local-stack scripts (deploy/local and deploy/local/openstack): where state,
# PID files, logs and cached binaries live, the management cluster's ports, logging, and the helpers
# that start, find and stop the processes the stack runs. Sourcing it only sets variables and defines
# functions; it creates nothing (`make kubeconfig` sources it as any user): ensure_dirs creates the
# directories. Every path below can be overridden from the environment.

mcb_local_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$mcb_local_dir/versions.env"

# --- paths --------------------------------------------------------------------------------------
# MCB_STATE_DIR is the stack's state root; the management cluster keeps its state below it, in
# MCB_MGMT_DIR. MCB_STATE, MCB_LOG and MCB_ETC are older spellings, still honoured (the tests read
# MCB_LOG and MCB_ETC).
MCB_STATE_DIR=${MCB_STATE_DIR:-${MCB_STATE:-/var/lib/magnum-capi-bridge}}
MCB_RUN_DIR=${MCB_RUN_DIR:-$MCB_STATE_DIR/run}
MCB_LOG_DIR=${MCB_LOG_DIR:-${MCB_LOG:-/var/log/magnum-capi-bridge}}
MCB_ETC_DIR=${MCB_ETC_DIR:-${MCB_ETC:-/etc/magnum-capi-bridge}}
MCB_LIB_DIR=${MCB_LIB_DIR:-/usr/local/lib/magnum-capi-bridge}
# Binaries built from the Go module proxy, outside the work tree so that a fresh clone reuses them.
MCB_CACHE=${MCB_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/magnum-capi-bridge}
MCB_BIN_DIR=$MCB_CACHE/bin
MCB_MGMT_DIR=${MCB_MGMT_DIR:-$MCB_STATE_DIR/mgmt}
MCB_PKI_DIR=$MCB_MGMT_DIR/pki
ADMIN_KUBECONFIG=$MCB_MGMT_DIR/admin.kubeconfig

# ensure_dirs: creates the directories of PID files, logs and configuration.
ensure_dirs() { mkdir -p "$MCB_RUN_DIR" "$MCB_LOG_DIR" "$MCB_ETC_DIR"; }

# --- the management cluster's ports (all on 127.0.0.1; CAPD's webhook servers, its in-memory debug
# server on :19000 and the fake workload API servers on :20000-30000 listen on every interface).
APISERVER_PORT=16443
# The zed bridge's Keystone token webhook (docs/tenant-view.md), which the apiserver asks about bearer
# tokens no other authenticator knows; bridge-up.sh serves it with the token-webhook certificate.
TOKEN_WEBHOOK_PORT=9514
TOKEN_WEBHOOK_KUBECONFIG=$MCB_MGMT_DIR/token-webhook.kubeconfig
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23791
KCM_PORT=10257
# name:webhook-port:health-port:diagnostics-port for the Cluster API managers, in start order.
CAPI_MANAGERS=(capi:19443:19540:19640 kcp:19444:19541:19641 cabpk:19445:19542:19642 capd:19446:19543:19643)

# --- logging ------------------------------------------------------------------------------------
# log_prefix names the part of the stack a script belongs to (the management cluster's: "mgmt: ").
log_prefix=
# log MESSAGE: one time-stamped line on standard error.
log() { printf '%s %s%s\n' "$(date -u +%H:%M:%S)" "$log_prefix" "$*" >&2; }
warn() { log "WARNING: $*"; }
die() {
  log "ERROR: $*"
  exit 1
}
require_root() { [ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts services)"; }

# --- waiting ------------------------------------------------------------------------------------
# wait_for DESCRIPTION SECONDS COMMAND...: retries COMMAND until it succeeds.
wait_for() {
  local what=$1 secs=$2
  shift 2
  for _ in $(seq $((secs * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  log "timed out after ${secs}s waiting for $what"
  return 1
}

# wait_gone PID SECONDS: true once PID has exited, false when it still runs after SECONDS.
wait_gone() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# --- PID files ----------------------------------------------------------------------------------
# Every process the stack starts has a PID file $MCB_RUN_DIR/NAME.pid. Three kinds of process, each
# with its own test that the PID is still ours:
#   pid_*        any live process (the bridges, Horizon);
#   service_*    the OpenStack services of openstack/up.sh: the command line names them;
#   component_*  the management cluster's binaries: /proc/PID/exe is the binary in $MCB_BIN_DIR.
pidfile() { printf '%s/%s.pid' "$MCB_RUN_DIR" "$1"; }

# pid_alive NAME: the PID file of NAME names a live process.
pid_alive() {
  local f
  f=$(pidfile "$1")
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# stop_pid NAME [TIMEOUT]: TERM, then KILL after TIMEOUT seconds (15); removes the PID file.
stop_pid() {
  local name=$1 timeout=${2:-15} f pid
  f=$(pidfile "$1")
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((timeout * 5))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { log "$name did not stop; killing"; kill -KILL "$pid" 2>/dev/null || true; }
  fi
  rm -f "$f"
}

# What the command line of each service openstack/up.sh starts contains. Checked together with the
# PID file, so a recycled PID is never mistaken for one of ours.
declare -gA SERVICE_MATCH=(
  [mariadb]=mariadbd
  [rabbitmq]=beam.smp
  [epmd]=epmd
  [keystone]=keystone-uwsgi.ini
  [fake-openstack]=fake-openstack
  [magnum-api]=magnum-api-uwsgi.ini
  [magnum-api-newest]=magnum-api-newest-uwsgi.ini
  [barbican-api]=barbican-api-uwsgi.ini
)

# service_running NAME: the PID file of NAME names a live process that looks like NAME.
service_running() {
  local file pid
  file=$(pidfile "$1")
  [ -s "$file" ] || return 1
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "${SERVICE_MATCH[$1]}"
}

# service_pid NAME: the PID in NAME's PID file.
service_pid() { cat "$(pidfile "$1")"; }

# stop_service NAME: stop the process of NAME's PID file (TERM, then KILL after 30 s) and remove the
# PID file. Does nothing without a PID file, so it never stops what openstack/up.sh did not start.
stop_service() {
  local name=$1 file pid
  file=$(pidfile "$name")
  [ -e "$file" ] || return 0
  if ! service_running "$name"; then
    log "$name: not running; removing stale PID file"
    rm -f "$file"
    return 0
  fi
  pid=$(<"$file")
  log "$name: stopping pid $pid"
  if [ "$name" = rabbitmq ]; then
    # The clean way: stops the node and waits for the OS process to exit.
    rabbitmqctl -q stop "$file" >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
  else
    kill -TERM "$pid" 2>/dev/null || true
  fi
  if ! wait_gone "$pid" 30; then
    warn "$name: pid $pid ignored TERM for 30 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || die "$name: pid $pid survives SIGKILL"
  fi
  rm -f "$file"
}

# component_binary COMPONENT: its file name in $MCB_BIN_DIR.
component_binary() {
  case $1 in
    etcd | kube-apiserver | kube-controller-manager) echo "$1" ;;
    capi | kcp | cabpk | capd | capo) echo "$1-manager" ;;
    *) echo "unknown component $1" >&2; return 1 ;;
  esac
}

# proc_alive PID: the process exists and is not a zombie waiting to be reaped.
proc_alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# component_pid COMPONENT: prints the PID from the PID file if that process is alive and runs our
# binary (also after a rebuild replaced the file, when the kernel reports "<path> (deleted)").
component_pid() {
  local name=$1 pid exe
  pid=$(cat "$(pidfile "$name")" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  proc_alive "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "${exe% (deleted)}" = "$MCB_BIN_DIR/$(component_binary "$name")" ] || return 1
  echo "$pid"
}

# stop_component COMPONENT [TIMEOUT]: SIGTERM, then SIGKILL after TIMEOUT seconds (MCB_STOP_TIMEOUT, 10).
stop_component() {
  local name=$1 timeout=${2:-${MCB_STOP_TIMEOUT:-10}} pid deadline
  if ! pid=$(component_pid "$name"); then
    rm -f "$(pidfile "$name")"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + timeout))
  while proc_alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if proc_alive "$pid"; then
    log "$name (pid $pid) ignored SIGTERM for ${timeout}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while proc_alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$(pidfile "$name")"
  log "stopped $name (pid $pid)"
}

# mgmt_lock: one mgmt-up/mgmt-down/capo-up/capo-down at a time (fd 9 stays open until the script exits).
mgmt_lock() {
  mkdir -p "$MCB_RUN_DIR"
  exec 9>"$MCB_RUN_DIR/mgmt.lock"
  flock -w 900 9 || die "another mgmt-up/mgmt-down holds $MCB_RUN_DIR/mgmt.lock"
}

# --- ports --------------------------------------------------------------------------------------
port_in_use() { [ -n "$(ss -Hltn "( sport = :$1 )" 2>/dev/null)" ]; }

# port_holder PORT: "pid=N (command)" of whoever listens on PORT, for error messages.
port_holder() {
  local pid
  pid=$(ss -Hltnp "( sport = :$1 )" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1)
  if [ -n "$pid" ]; then
    printf 'pid=%s (%s)' "$pid" "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
  else
    printf 'an unknown process'
  fi
}

# refuse_foreign_port NAME PORT: stop here if something the stack did not start holds PORT.
refuse_foreign_port() {
  if port_in_use "$2"; then
    die "$1: port $2 is already in use by $(port_holder "$2"), which up.sh did not start; stop it or change the port in stack.env"
  fi
}

# wait_http NAME URL SECONDS LOG: wait until URL answers with any HTTP status below 500; fail early
# with the end of LOG when the service dies first.
wait_http() {
  local name=$1 url=$2 seconds=$3 log=$4 code i
  for ((i = 0; i < seconds * 4; i++)); do
    code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" 2>/dev/null || true)
    if [[ $code =~ ^[1-4][0-9][0-9]$ ]]; then
      return 0
    fi
    if ! service_running "$name"; then
      tail -n 30 "$log" >&2 || true
      die "$name died during start-up; its log is $log"
    fi
    sleep 0.25
  done
  tail -n 30 "$log" >&2 || true
  die "$name did not answer on $url within $seconds s; its log is $log"
}

# --- files and databases ------------------------------------------------------------------------
# render TEMPLATE: print TEMPLATE with ${VAR} replaced from the environment. A missing variable is
# an error (string.Template.substitute), so a typo cannot produce an empty setting.
render() {
  /usr/bin/python3 -c '
import os, string, sys
try:
    sys.stdout.write(string.Template(open(sys.argv[1]).read()).substitute(os.environ))
except KeyError as err:
    sys.exit("render %s: variable %s is not set" % (sys.argv[1], err))
' "$1"
}

# install_file SRC DEST MODE OWNER:GROUP: put SRC at DEST when the content, mode or owner differ.
# Returns 0 when DEST changed, 1 when it was already identical.
install_file() {
  local src=$1 dest=$2 mode=$3 owner=$4
  if [ -e "$dest" ] && cmp -s "$src" "$dest" &&
    [ "$(stat -c '%a %U:%G' "$dest")" = "$mode $owner" ]; then
    return 1
  fi
  install -D -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$src" "$dest.tmp-mcb"
  mv -f "$dest.tmp-mcb" "$dest"
  return 0
}

# keep_original FILE: save a file that a package shipped, once, before openstack/up.sh replaces it.
keep_original() {
  if [ -e "$1" ] && [ ! -e "$1.orig-mcb" ] && ! grep -q 'deploy/local/openstack/up.sh' "$1"; then
    cp -p "$1" "$1.orig-mcb"
  fi
}

# sql: run SQL from stdin as MariaDB's root (unix socket), without echoing it: it may hold passwords.
# apt_install_missing WHO PACKAGE...: installs those of the packages that are not installed yet, with
# openstack/debconf-preseed.txt's answers, and keeps their maintainer scripts from starting services
# (WHO, the calling script, starts what it needs, on loopback) with a temporary policy-rc.d that goes
# whatever happens to the install; a failed install is retried once after an apt update.
apt_install_missing() {
	local who=$1 p missing=() created=0
	shift
	for p in "$@"; do
		dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		log "packages present: $*"
		return 0
	fi
	log "installing: ${missing[*]}"
	debconf-set-selections <"$mcb_local_dir/openstack/debconf-preseed.txt"
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\n# temporary, from %s\nexit 101\n' "$who" >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		created=1
	fi
	(
		[ "$created" = 0 ] || trap 'rm -f /usr/sbin/policy-rc.d' EXIT
		if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q \
			--no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}"; then
			log "install failed; refreshing the package lists once and retrying"
			apt-get -o DPkg::Lock::Timeout=900 update -q
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q \
				--no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}"
		fi
	)
}

sql() { mysql -uroot --batch --skip-column-names; }

sql_quote() { printf "'%s'" "${1//\'/\'\'}"; }

# --- devstack -----------------------------------------------------------------------------------
# use_devstack_shims: stand-ins for the few devstack functions deploy/devstack/plugin.sh calls, so
# the local stack runs the plugin's own functions (bridge-up.sh, bridge-rbac.sh). Each does what
# devstack's does, minimally: iniset edits one key of an ini file in place, run_process/stop_process
# start and stop a background process with a PID file and a log (devstack uses systemd units). They
# keep devstack's names and signatures, so die becomes devstack's `die LINENO MESSAGE`. Nothing else
# of devstack is imitated.
# shellcheck disable=SC2317 # the stand-ins are called by plugin.sh, which shellcheck does not follow here
use_devstack_shims() {
  # Devstack's phase logging and fatal errors; each line names the plugin function it comes from.
  echo_summary() { printf '%s devstack plugin %s: %s\n' "$(date -u +%H:%M:%S)" "${FUNCNAME[1]:-}" "$*" >&2; }
  die() {
    local line=$1
    shift
    printf '%s devstack plugin %s: error (line %s): %s\n' "$(date -u +%H:%M:%S)" "${FUNCNAME[1]:-}" "$line" "$*" >&2
    exit 1
  }
  # Devstack runs as an unprivileged user with sudo; the local stack runs as root, without sudo.
  command -v sudo >/dev/null 2>&1 || sudo() { "$@"; }
  # Only the plugin's functions are used here, never its phase dispatch.
  is_service_enabled() { return 1; }
  enable_service() { :; }
  disable_service() { :; }
  trueorfalse() {
    local default=$1 v=${!2:-}
    case ${v,,} in 1 | yes | true | on) echo True ;; 0 | no | false | off) echo False ;; *) echo "$default" ;; esac
  }
  # iniset FILE SECTION KEY VALUE: set KEY in [SECTION] (created when missing), keeping everything else.
  iniset() {
    /usr/bin/python3 - "$@" <<'PY'
import re, sys
path, section, key, value = sys.argv[1:5]
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    lines = []
out, cur, done = [], None, False
for i, line in enumerate(lines):
    m = re.match(r"\s*\[([^\]]+)\]", line)
    if m:
        if cur == section and not done:
            while out and out[-1].strip() == "":
                out.pop()
            out.append(f"{key} = {value}")
            out.append("")
            done = True
        cur = m.group(1)
    elif cur == section and not done and re.match(rf"\s*{re.escape(key)}\s*=", line):
        line, done = f"{key} = {value}", True
    out.append(line)
if not done:
    if cur != section:
        if out and out[-1].strip():
            out.append("")
        out.append(f"[{section}]")
    out.append(f"{key} = {value}")
open(path, "w").write("\n".join(out) + "\n")
PY
  }
  # run_process NAME COMMAND: starts COMMAND in the background; PID file $MCB_RUN_DIR/NAME.pid, log
  # $MCB_LOG_DIR/NAME.log (appended to).
  run_process() {
    local name=$1 argv
    read -r -a argv <<<"$2" # split as devstack's run_process splits it
    start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile "$name")" \
      --output "$MCB_LOG_DIR/$name.log" --exec "${argv[0]}" -- "${argv[@]:1}"
  }
  stop_process() { stop_pid "$1" 30; }
}
