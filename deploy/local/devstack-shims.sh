# Stand-ins for the few devstack functions deploy/devstack/plugin.sh calls, so the local stack runs
# the plugin's own functions (bridge-up.sh). Each does what devstack's does, minimally: iniset edits
# one key of an ini file in place, run_process/stop_process start and stop a background process with
# a PID file and a log (devstack uses systemd units). Nothing else of devstack is imitated.
# shellcheck shell=bash

# Devstack's phase logging and fatal errors; each line names the plugin function it comes from.
echo_summary() { printf '%s devstack plugin %s: %s\n' "$(date -u +%H:%M:%S)" "${FUNCNAME[1]:-}" "$*" >&2; }
die() { local line=$1; shift; printf '%s devstack plugin %s: error (line %s): %s\n' "$(date -u +%H:%M:%S)" "${FUNCNAME[1]:-}" "$line" "$*" >&2; exit 1; }
# Devstack runs as an unprivileged user with sudo; the local stack runs as root, without sudo.
command -v sudo >/dev/null 2>&1 || sudo() { "$@"; }
# Only the plugin's functions are used here, never its phase dispatch.
is_service_enabled() { return 1; }
enable_service() { :; }
disable_service() { :; }
trueorfalse() { local default=$1 v=${!2:-}; case ${v,,} in 1|yes|true|on) echo True ;; 0|no|false|off) echo False ;; *) echo "$default" ;; esac; }

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

# run_process NAME COMMAND: starts COMMAND in the background; PID file $MCB_RUN/NAME.pid, log
# $MCB_LOG/NAME.log (appended to).
run_process() {
  local name=$1 argv
  read -r -a argv <<<"$2" # split as devstack's run_process splits it
  start-stop-daemon --start --background --make-pidfile --pidfile "$MCB_RUN/$name.pid" \
    --output "$MCB_LOG/$name.log" --exec "${argv[0]}" -- "${argv[@]:1}"
}

stop_process() { stop_pid "$1" 30; }
