#!/usr/bin/env bash
# Bring up the newest magnum-api (23.0.0 from Debian forky) next to the Zed one of up.sh: a debootstrap
# chroot ($NEWEST_ROOT) with magnum-api, uwsgi, magnumclient 5 / openstackclient and the bridge's own
# magnum.drivers entry point, serving on $MCB_HOST:$MAGNUM_NEW_API_PORT. It shares the host's MariaDB,
# RabbitMQ, Keystone and fake Glance/Nova/Neutron (so up.sh must have run), with its own database
# (magnum_new, created by magnum-db-manage), RabbitMQ vhost ($MAGNUM_NEW_VHOST) and Keystone region
# ($MAGNUM_NEW_REGION) for the existing container-infra service. No conductor: the second bridge
# instance (deploy/local/bridge-up.sh newest) consumes its RPC.
#
# Idempotent. A complete chroot (marker file) is reused and packages are only installed when the list
# changed, so a warm run takes seconds; a changed config or driver restarts only magnum-api.
# PID file: $MCB_RUN_DIR/magnum-api-newest.pid; mounts it made: $MCB_RUN_DIR/magnum-newest.mounts.
# Stop with newest-down.sh. Remove entirely (not done by any script): newest-down.sh, then
# rm -rf --one-file-system $NEWEST_ROOT, DROP DATABASE magnum_new, rabbitmqctl delete_vhost magnum-new.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=stack.env
. "$HERE/stack.env"

require_root
umask 022
install -d -m 0755 "$MCB_STATE_DIR" "$MCB_RUN_DIR" "$MCB_LOG_DIR" "$MCB_ETC_DIR"
exec > >(tee -a "$MCB_LOG_DIR/openstack-newest-up.log") 2>&1
log "newest-up.sh: start (log: $MCB_LOG_DIR/openstack-newest-up.log)"

STEP_START=$SECONDS
step() {
	log "---- $* (+$((SECONDS - STEP_START)) s)"
}

ROOT=$NEWEST_ROOT
MARKER=$ROOT/.mcb-bootstrap-complete
PACKAGES_STAMP=$ROOT/.mcb-packages
MOUNTS=$MCB_RUN_DIR/magnum-newest.mounts
API_LOG=$MCB_LOG_DIR/magnum-api-newest.log
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# in_root CMD...: run CMD inside the chroot with a clean environment (no OS_* or host paths).
in_root() {
	chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		DEBIAN_FRONTEND=noninteractive "$@"
}

# ---------------------------------------------------------------------------------------------
step "prerequisites (up.sh's stack)"
mysqladmin -uroot --connect-timeout=2 ping >/dev/null 2>&1 || die "MariaDB does not answer; run up.sh first"
port_in_use "$RABBIT_PORT" || die "RabbitMQ does not listen on :$RABBIT_PORT; run up.sh first"
curl -sf -m 5 -o /dev/null "$KEYSTONE_URL" || die "Keystone does not answer on $KEYSTONE_URL; run up.sh first"
port_in_use "$FAKE_COMPUTE_PORT" || die "the fake Nova does not listen on :$FAKE_COMPUTE_PORT; run up.sh first"
# The chroot's magnum user gets the host's ids: any other uid could be a host account (with 102 the
# API ran as the host's mysql), and files the two share (configs installed from here) agree on owners.
MAGNUM_UID=$(id -u magnum 2>/dev/null) || die "no host user magnum (installed by up.sh with magnum-api)"
MAGNUM_GID=$(id -g magnum)

# ---------------------------------------------------------------------------------------------
step "chroot $ROOT ($NEWEST_SUITE)"
# unmount_below DIR: unmount everything mounted at or below DIR, deepest first.
unmount_below() {
	findmnt -rn -o TARGET | awk -v d="$1" 'index($0, d "/") == 1 || $0 == d' | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
}
if [ -e "$MARKER" ]; then
	log "chroot: complete ($(cat "$MARKER")); reused"
else
	if [ -e "$ROOT" ]; then
		log "chroot: $ROOT exists without $MARKER (an interrupted run); removing it"
		unmount_below "$ROOT"
		rm -rf --one-file-system "$ROOT"
		rm -f "$MOUNTS"
	fi
	if ! command -v debootstrap >/dev/null; then
		log "installing debootstrap (log $MCB_LOG_DIR/newest-host-apt.log)"
		{
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends debootstrap ||
				{ apt-get -o DPkg::Lock::Timeout=900 update -q &&
					DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends debootstrap; }
		} >"$MCB_LOG_DIR/newest-host-apt.log" 2>&1 || die "installing debootstrap failed; see $MCB_LOG_DIR/newest-host-apt.log"
	fi
	# bookworm's debootstrap has no script for forky (or trixie); they are all "sid".
	script=/usr/share/debootstrap/scripts/$NEWEST_SUITE
	[ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
	log "chroot: debootstrap --variant=minbase $NEWEST_SUITE from $NEWEST_MIRROR (log $MCB_LOG_DIR/newest-debootstrap.log)"
	if ! debootstrap --variant=minbase --arch=amd64 "$NEWEST_SUITE" "$ROOT" "$NEWEST_MIRROR" "$script" \
		>"$MCB_LOG_DIR/newest-debootstrap.log" 2>&1; then
		tail -n 20 "$MCB_LOG_DIR/newest-debootstrap.log" >&2
		die "debootstrap failed; see $MCB_LOG_DIR/newest-debootstrap.log (the partial tree is removed by the next run)"
	fi
	echo "$NEWEST_SUITE $(date -u +%FT%TZ)" >"$MARKER"
	log "chroot: bootstrapped"
fi

# What every run makes sure of inside the tree (cheap): no service starts from maintainer scripts,
# the snapshot mirror's expired Release files are accepted, names resolve.
printf '#!/bin/sh\n# from deploy/local/openstack/newest-up.sh: services are started by the script\nexit 101\n' >"$TMP/policy-rc.d"
install_file "$TMP/policy-rc.d" "$ROOT/usr/sbin/policy-rc.d" 755 root:root || true
echo 'Acquire::Check-Valid-Until "false";' >"$TMP/no-valid-until"
install_file "$TMP/no-valid-until" "$ROOT/etc/apt/apt.conf.d/99mcb-no-valid-until" 644 root:root || true
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$TMP/hosts"
install_file "$TMP/hosts" "$ROOT/etc/hosts" 644 root:root || true
install_file /etc/resolv.conf "$ROOT/etc/resolv.conf" 644 root:root || true

# Mounts: /proc (Python and uwsgi read it) and a private /dev/shm. Recorded so newest-down.sh
# unmounts exactly these; one that is already there and not recorded is someone else's.
touch "$MOUNTS"
mount_once() { # mount_once TARGET MOUNT-ARGS...
	local target=$1
	shift
	if mountpoint -q "$target"; then
		grep -qxF "$target" "$MOUNTS" || warn "$target is mounted, not by newest-up.sh: left alone"
		return 0
	fi
	mkdir -p "$target"
	mount "$@" "$target"
	grep -qxF "$target" "$MOUNTS" || echo "$target" >>"$MOUNTS"
}
mount_once "$ROOT/proc" -t proc proc
mount_once "$ROOT/dev/shm" -t tmpfs -o mode=1777,size=64m tmpfs

# ---------------------------------------------------------------------------------------------
step "packages"
PACKAGES=(magnum-api magnum-common python3-magnum python3-magnumclient python3-openstackclient
	uwsgi-core uwsgi-plugin-python3 python3-pymysql ca-certificates)
NEWEST_CHANGED=0
if [ "$(cat "$PACKAGES_STAMP" 2>/dev/null)" = "${PACKAGES[*]}" ]; then
	log "packages: installed (${PACKAGES[*]})"
else
	apt_log=$MCB_LOG_DIR/newest-apt.log
	log "packages: installing ${PACKAGES[*]} (log $apt_log)"
	{
		in_root apt-get update -q &&
			# adduser first: magnum-common's debconf questions are asked before it would be unpacked.
			in_root apt-get install -y -q --no-install-recommends adduser
	} >"$apt_log" 2>&1 || {
		tail -n 20 "$apt_log" >&2
		die "apt-get in the chroot failed; see $apt_log"
	}
	grep -v '^keystone' "$HERE/debconf-preseed.txt" | in_root debconf-set-selections
	# The host's ids, created before the package would pick its own (see prerequisites).
	if ! in_root getent group magnum >/dev/null; then
		in_root groupadd --system -g "$MAGNUM_GID" magnum
	fi
	if ! in_root getent passwd magnum >/dev/null; then
		in_root useradd --system -u "$MAGNUM_UID" -g "$MAGNUM_GID" -d /var/lib/magnum -M -s /usr/sbin/nologin magnum
	fi
	in_root apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold "${PACKAGES[@]}" \
		>>"$apt_log" 2>&1 || {
		tail -n 20 "$apt_log" >&2
		die "installing magnum-api in the chroot failed; see $apt_log"
	}
	in_root apt-get clean
	echo "${PACKAGES[*]}" >"$PACKAGES_STAMP"
	NEWEST_CHANGED=1
fi
ids=$(in_root id -u magnum):$(in_root id -g magnum)
[ "$ids" = "$MAGNUM_UID:$MAGNUM_GID" ] ||
	die "the chroot's magnum user is $ids but the host's is $MAGNUM_UID:$MAGNUM_GID; rebuild the chroot (rm -rf --one-file-system $ROOT after newest-down.sh)"
# dpkg-query's format, not a shell expansion.
# shellcheck disable=SC2016
MAGNUM_NEW_VERSION=$(in_root dpkg-query -W -f='${Version}' python3-magnum)
# shellcheck disable=SC2016 # dpkg-query's format
log "packages: magnum $MAGNUM_NEW_VERSION, magnumclient $(in_root dpkg-query -W -f='${Version}' python3-magnumclient)"

# ---------------------------------------------------------------------------------------------
step "the bridge's magnum.drivers entry point"
# Copied into the tree and installed by the chroot's own Python (3.14), into its /usr/local site.
rm -rf "$ROOT/usr/local/src/magnum-capi-bridge-driver"
mkdir -p "$ROOT/usr/local/src/magnum-capi-bridge-driver"
cp -r "$REPO/deploy/magnum-driver/install.py" "$REPO/deploy/magnum-driver/pyproject.toml" \
	"$REPO/deploy/magnum-driver/magnum_capi_bridge_driver" "$ROOT/usr/local/src/magnum-capi-bridge-driver/"
DRIVER_OUT=$(in_root /usr/bin/python3 /usr/local/src/magnum-capi-bridge-driver/install.py)
log "magnum driver: $DRIVER_OUT"
case $DRIVER_OUT in installed:*) NEWEST_CHANGED=1 ;; esac

# ---------------------------------------------------------------------------------------------
step "configuration"
keep_original "$ROOT/etc/magnum/magnum.conf"
render "$HERE/templates/magnum-newest.conf" >"$TMP/magnum.conf"
install_file "$TMP/magnum.conf" "$ROOT/etc/magnum/magnum.conf" 640 root:magnum && NEWEST_CHANGED=1
render "$HERE/templates/magnum-api-newest-uwsgi.ini" >"$TMP/uwsgi.ini"
install_file "$TMP/uwsgi.ini" "$ROOT/etc/magnum/magnum-api-newest-uwsgi.ini" 644 root:root && NEWEST_CHANGED=1
install -d -o magnum -g magnum -m 0750 "$ROOT/var/lib/magnum" "$ROOT/var/lib/magnum/lock"
install -d -o magnum -g magnum -m 0755 "$ROOT/var/log/magnum"
[ -e "$ROOT/var/log/magnum/magnum-api.log" ] || install -o magnum -g magnum -m 0640 /dev/null "$ROOT/var/log/magnum/magnum-api.log"
ln -sfn "$ROOT/var/log/magnum/magnum-api.log" "$API_LOG"
# The chroot's CLI (magnumclient 5) uses the host's clouds, devstack-newest among them.
[ -e /etc/openstack/clouds.yaml ] || die "no /etc/openstack/clouds.yaml; run up.sh first"
install_file /etc/openstack/clouds.yaml "$ROOT/etc/openstack/clouds.yaml" 644 root:root || true

# ---------------------------------------------------------------------------------------------
step "MariaDB: magnum_new"
{
	echo "CREATE DATABASE IF NOT EXISTS magnum_new CHARACTER SET utf8 COLLATE utf8_general_ci;"
	pw=$(sql_quote "$MAGNUM_NEW_DB_PASSWORD")
	for host in localhost 127.0.0.1; do
		echo "CREATE USER IF NOT EXISTS 'magnum_new'@'$host' IDENTIFIED BY $pw;"
		echo "ALTER USER 'magnum_new'@'$host' IDENTIFIED BY $pw;"
		echo "GRANT ALL PRIVILEGES ON magnum_new.* TO 'magnum_new'@'$host';"
	done
} | sql
TABLES=$(echo "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='magnum_new';" | sql)
if [ "$TABLES" = 0 ] || [ "$(cat "$MCB_STATE_DIR/magnum-newest-db.stamp" 2>/dev/null)" != "$MAGNUM_NEW_VERSION" ]; then
	log "magnum_new: magnum-db-manage upgrade (magnum $MAGNUM_NEW_VERSION)"
	chroot --userspec="$MAGNUM_UID:$MAGNUM_GID" "$ROOT" /usr/bin/env -i HOME=/var/lib/magnum \
		PATH=/usr/bin:/bin LANG=C.UTF-8 sh -c 'cd /var/lib/magnum && magnum-db-manage upgrade' \
		>"$MCB_LOG_DIR/newest-db-manage.log" 2>&1 || {
		tail -n 20 "$MCB_LOG_DIR/newest-db-manage.log" >&2
		die "magnum-db-manage upgrade failed; see $MCB_LOG_DIR/newest-db-manage.log"
	}
	echo "$MAGNUM_NEW_VERSION" >"$MCB_STATE_DIR/magnum-newest-db.stamp"
fi
log "magnum_new: $(echo "SELECT version_num FROM magnum_new.alembic_version;" | sql) (alembic head)"

# ---------------------------------------------------------------------------------------------
step "RabbitMQ: vhost $MAGNUM_NEW_VHOST"
if ! rabbitmqctl -q list_vhosts name 2>/dev/null | grep -qxF "$MAGNUM_NEW_VHOST"; then
	rabbitmqctl -q add_vhost "$MAGNUM_NEW_VHOST" >/dev/null
	log "RabbitMQ: created vhost $MAGNUM_NEW_VHOST"
fi
if ! rabbitmqctl -q list_permissions -p "$MAGNUM_NEW_VHOST" 2>/dev/null |
	awk -v u="$RABBIT_USER" '$1 == u && $2 == ".*" && $3 == ".*" && $4 == ".*" { ok = 1 } END { exit !ok }'; then
	rabbitmqctl -q set_permissions -p "$MAGNUM_NEW_VHOST" "$RABBIT_USER" '.*' '.*' '.*' >/dev/null
	log "RabbitMQ: $RABBIT_USER may use $MAGNUM_NEW_VHOST"
fi

# ---------------------------------------------------------------------------------------------
step "Keystone: region $MAGNUM_NEW_REGION"
/usr/bin/python3 "$HERE/identity.py" --newest || die "identity.py --newest failed"

# ---------------------------------------------------------------------------------------------
step "magnum-api 23"
if service_running magnum-api-newest && [ "$NEWEST_CHANGED" = 1 ]; then
	log "magnum-api-newest: packages, configuration or driver changed, restarting"
	stop_service magnum-api-newest
fi
if service_running magnum-api-newest; then
	log "magnum-api-newest: running (pid $(service_pid magnum-api-newest))"
else
	stop_service magnum-api-newest # a stale PID file
	refuse_foreign_port magnum-api-newest "$MAGNUM_NEW_API_PORT"
	# chroot execs uwsgi, so the PID file names the uwsgi master.
	start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile magnum-api-newest)" \
		--chdir / --startas /usr/sbin/chroot -- "$ROOT" /usr/bin/uwsgi_python3 --ini /etc/magnum/magnum-api-newest-uwsgi.ini
	wait_http magnum-api-newest "http://$MCB_HOST:$MAGNUM_NEW_API_PORT/" 90 "$API_LOG"
	log "magnum-api-newest: started (pid $(service_pid magnum-api-newest)) on $MAGNUM_NEW_URL"
fi

# ---------------------------------------------------------------------------------------------
step "smoke test"
# Keystone, the RegionTwo catalog entry, magnum-api 23's auth middleware and DB, through magnumclient 5.
if ! SMOKE=$(in_root openstack --os-cloud devstack-newest coe cluster template list -f value -c uuid 2>&1); then
	printf '%s\n' "$SMOKE" >&2
	die "smoke test failed: chroot $ROOT openstack --os-cloud devstack-newest coe cluster template list; see $API_LOG"
fi
log "smoke test: demo sees $(printf '%s' "$SMOKE" | grep -c . || true) cluster template(s) in $MAGNUM_NEW_REGION"

cat <<EOF

magnum-api 23 is up after $SECONDS s (stop it with deploy/local/openstack/newest-down.sh).
  magnum-api      $MAGNUM_NEW_URL   ($MAGNUM_NEW_VERSION in $ROOT, region $MAGNUM_NEW_REGION)
  RabbitMQ        vhost $MAGNUM_NEW_VHOST   database magnum_new   log $API_LOG
  CLI (1.14)      chroot $ROOT openstack --os-cloud devstack-newest coe cluster list
EOF
