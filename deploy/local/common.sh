# Shared by the local-stack scripts: where state, PID files and logs live, and small helpers.
# shellcheck shell=bash
MCB_STATE=${MCB_STATE:-/var/lib/magnum-capi-bridge}
MCB_RUN=$MCB_STATE/run
MCB_LOG=${MCB_LOG:-/var/log/magnum-capi-bridge}
MCB_ETC=${MCB_ETC:-/etc/magnum-capi-bridge}
mkdir -p "$MCB_RUN" "$MCB_LOG" "$MCB_ETC"

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# pid_alive NAME: true when the PID file NAME.pid names a live process.
pid_alive() {
  local f=$MCB_RUN/$1.pid
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# stop_pid NAME [TIMEOUT]: TERM, then KILL after TIMEOUT seconds; removes the PID file.
stop_pid() {
  local name=$1 timeout=${2:-15} f=$MCB_RUN/$1.pid pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((timeout * 5))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { log "$name did not stop; killing"; kill -KILL "$pid" 2>/dev/null || true; }
  fi
  rm -f "$f"
}

# wait_for DESCRIPTION SECONDS COMMAND...: retries COMMAND until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  for _ in $(seq $((secs * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  log "timed out after ${secs}s waiting for $what"; return 1
}
