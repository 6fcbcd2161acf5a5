# shellcheck shell=bash
# Helpers shared by up.sh and down.sh. Sourced after stack.env.

say() { printf '%s  %s\n' "$(date +%H:%M:%S)" "$*"; }
warn() { printf '%s  WARNING: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	printf '%s  ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2
	exit 1
}

require_root() { [ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts services)"; }

# What a live process of each service started by up.sh has in its command line. Checked together
# with the PID file, so a recycled PID is never mistaken for one of ours.
declare -A PROCESS_MATCH=(
	[mariadb]=mariadbd
	[rabbitmq]=beam.smp
	[epmd]=epmd
	[keystone]=keystone-uwsgi.ini
	[fake-openstack]=fake-openstack
	[magnum-api]=magnum-api-uwsgi.ini
	[magnum-api-newest]=magnum-api-newest-uwsgi.ini
)

pidfile() { printf '%s/%s.pid' "$MCB_RUN_DIR" "$1"; }

# running NAME: the PID file of NAME names a live process that looks like NAME.
running() {
	local file pid
	file=$(pidfile "$1")
	[ -s "$file" ] || return 1
	pid=$(<"$file")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "${PROCESS_MATCH[$1]}"
}

pid_of() { cat "$(pidfile "$1")"; }

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

# refuse_foreign_port NAME PORT: stop here if something up.sh did not start holds PORT.
refuse_foreign_port() {
	if port_in_use "$2"; then
		die "$1: port $2 is already in use by $(port_holder "$2"), which up.sh did not start; stop it or change the port in stack.env"
	fi
}

wait_gone() { # wait_gone PID SECONDS
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# stop_service NAME: stop the process of NAME's PID file (TERM, then KILL after 30 s) and remove the
# PID file. Does nothing without a PID file, so it never stops what up.sh did not start.
stop_service() {
	local name=$1 file pid
	file=$(pidfile "$name")
	[ -e "$file" ] || return 0
	if ! running "$name"; then
		say "$name: not running; removing stale PID file"
		rm -f "$file"
		return 0
	fi
	pid=$(<"$file")
	say "$name: stopping pid $pid"
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

# wait_http NAME URL SECONDS LOG: wait until URL answers with any HTTP status below 500; fail early
# with the end of LOG when the process dies first.
wait_http() {
	local name=$1 url=$2 seconds=$3 log=$4 code i
	for ((i = 0; i < seconds * 4; i++)); do
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" 2>/dev/null || true)
		if [[ $code =~ ^[1-4][0-9][0-9]$ ]]; then
			return 0
		fi
		if ! running "$name"; then
			tail -n 30 "$log" >&2 || true
			die "$name died during start-up; its log is $log"
		fi
		sleep 0.25
	done
	tail -n 30 "$log" >&2 || true
	die "$name did not answer on $url within $seconds s; its log is $log"
}

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

# keep_original FILE: save a file that a package shipped, once, before up.sh replaces it.
keep_original() {
	if [ -e "$1" ] && [ ! -e "$1.orig-mcb" ] && ! grep -q 'deploy/local/openstack/up.sh' "$1"; then
		cp -p "$1" "$1.orig-mcb"
	fi
}

# sql: run SQL from stdin as MariaDB's root (unix socket), without echoing it: it may hold passwords.
sql() { mysql -uroot --batch --skip-column-names; }

sql_quote() { printf "'%s'" "${1//\'/\'\'}"; }
