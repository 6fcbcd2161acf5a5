#!/usr/bin/env bash
# barbican.sh [up|stop|start]: Barbican on the local stack, for Magnum's default certificate
# manager ([certificates] cert_manager_type = barbican). `up` (the default, run by up.sh) installs
# Debian's barbican-api (bookworm, Zed), gives it a MariaDB database and the simple_crypto plugin
# with a key-encryption key of its own, runs it under uwsgi on $MCB_HOST:$BARBICAN_PORT and
# registers the key-manager service and Barbican's service user in Keystone. `stop` and `start` stop
# and start the API alone (the fault tests stop it for a while; `up` also checks packages and
# configuration).
#
# Idempotent: a second `up` changes nothing; a changed configuration restarts barbican-api only.
# It needs MariaDB and Keystone (up.sh starts both first) and prints nothing secret: the
# key-encryption key stays in $MCB_STATE_DIR/barbican-kek and /etc/barbican/barbican.conf, both
# unreadable to others.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=stack.env
. "$HERE/stack.env"

require_root
umask 022
UWSGI=/usr/bin/uwsgi_python3
[ -x "$UWSGI" ] || UWSGI=/usr/bin/uwsgi-core
BARBICAN_LOG=$MCB_LOG_DIR/barbican-api.log

start_api() {
	if service_running barbican-api; then
		log "barbican-api: running (pid $(service_pid barbican-api))"
		return 0
	fi
	refuse_foreign_port barbican-api "$BARBICAN_PORT"
	start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile barbican-api)" \
		--chdir /var/lib/barbican --exec "$UWSGI" -- --ini "$MCB_ETC_DIR/barbican-api-uwsgi.ini"
	wait_http barbican-api "$BARBICAN_URL/" 90 "$BARBICAN_LOG"
	log "barbican-api: started (pid $(service_pid barbican-api)) on $BARBICAN_URL"
}

case "${1:-up}" in
stop)
	stop_service barbican-api
	exit 0
	;;
start)
	[ -s "$MCB_ETC_DIR/barbican-api-uwsgi.ini" ] || die "barbican-api is not set up yet: run $0 up"
	start_api
	exit 0
	;;
up) ;;
*) die "usage: $0 [up|stop|start]" ;;
esac

install -d -m 0755 "$MCB_STATE_DIR" "$MCB_RUN_DIR" "$MCB_LOG_DIR" "$MCB_ETC_DIR"
log "barbican.sh: start"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------------------------------------
apt_install_missing deploy/local/openstack/barbican.sh barbican-api barbican-common python3-barbican uwsgi-core \
	uwsgi-plugin-python3 python3-pymysql
BARBICAN_VERSION=$(dpkg-query -W -f='${Version}' python3-barbican)

# ---------------------------------------------------------------------------------------------
mysqladmin -uroot --connect-timeout=2 ping >/dev/null 2>&1 || die "MariaDB does not answer: run up.sh first"
{
	echo "CREATE DATABASE IF NOT EXISTS barbican CHARACTER SET utf8 COLLATE utf8_general_ci;"
	pw=$(sql_quote "$BARBICAN_DB_PASSWORD")
	for host in localhost 127.0.0.1; do
		echo "CREATE USER IF NOT EXISTS 'barbican'@'$host' IDENTIFIED BY $pw;"
		echo "ALTER USER 'barbican'@'$host' IDENTIFIED BY $pw;"
		echo "GRANT ALL PRIVILEGES ON barbican.* TO 'barbican'@'$host';"
	done
} | sql
log "Barbican: database barbican and its user are in place"

# The key-encryption key wraps every project's key: made once, never replaced (secrets stored under
# another one could not be decrypted any more).
KEK_FILE=$MCB_STATE_DIR/barbican-kek
if [ ! -s "$KEK_FILE" ]; then
	(umask 077 && head -c 32 /dev/urandom | base64 >"$KEK_FILE")
	log "Barbican: made a key-encryption key ($KEK_FILE)"
fi
BARBICAN_KEK=$(<"$KEK_FILE")
export BARBICAN_KEK

CHANGED=0
keep_original /etc/barbican/barbican.conf
render "$HERE/templates/barbican.conf" >"$TMP/barbican.conf"
install_file "$TMP/barbican.conf" /etc/barbican/barbican.conf 640 root:barbican && CHANGED=1
render "$HERE/templates/barbican-api-uwsgi.ini" >"$TMP/barbican-api-uwsgi.ini"
install_file "$TMP/barbican-api-uwsgi.ini" "$MCB_ETC_DIR/barbican-api-uwsgi.ini" 644 root:root && CHANGED=1
[ -e "$BARBICAN_LOG" ] || install -o barbican -g barbican -m 0640 /dev/null "$BARBICAN_LOG"
install -d -o barbican -g barbican -m 0750 /var/lib/barbican

# As for Keystone and magnum: the schema only changes with the package.
TABLES=$(echo "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='barbican';" | sql)
if [ "$TABLES" = 0 ] || [ "$(cat "$MCB_STATE_DIR/barbican-db.stamp" 2>/dev/null)" != "$BARBICAN_VERSION" ]; then
	log "Barbican: barbican-manage db upgrade"
	(cd /var/lib/barbican && su barbican -s /bin/sh -c 'barbican-manage db upgrade') >>"$BARBICAN_LOG" 2>&1 ||
		die "barbican-manage db upgrade failed; see $BARBICAN_LOG"
	echo "$BARBICAN_VERSION" >"$MCB_STATE_DIR/barbican-db.stamp"
fi

# ---------------------------------------------------------------------------------------------
curl -s -o /dev/null -m 5 "$KEYSTONE_URL" || die "Keystone does not answer at $KEYSTONE_URL: run up.sh first"
/usr/bin/python3 "$HERE/identity.py" --barbican || die "identity.py --barbican failed"

if service_running barbican-api && [ "$CHANGED" = 1 ]; then
	log "barbican-api: configuration changed, restarting"
	stop_service barbican-api
fi
start_api

# The whole chain as Magnum's conductor uses it: the service user's token, the catalog entry, the
# policy, the crypto plugin. A secret is stored, read back and deleted; its payload is not printed.
if ! SMOKE=$(/usr/bin/python3 - 2>&1 <<'PY'
import os, sys
from keystoneauth1 import session
from keystoneauth1.identity import v3
from barbicanclient.v1 import client

auth = v3.Password(auth_url=os.environ["KEYSTONE_URL"], username="magnum",
                   password=os.environ["MAGNUM_SERVICE_PASSWORD"], project_name="service",
                   user_domain_id="default", project_domain_id="default")
sess = session.Session(auth=auth)
endpoint = sess.get_endpoint(service_type="key-manager", interface="public",
                             region_name=os.environ["MCB_REGION"])
barbican = client.Client(session=sess, endpoint=endpoint)
probe = barbican.secrets.create(name="barbican.sh smoke test", payload="smoke")
ref = probe.store()
ok = barbican.secrets.get(ref).payload == "smoke"
barbican.secrets.delete(ref)
sys.exit(0 if ok else "the secret read back differs from the one stored")
PY
); then
	printf '%s\n' "$SMOKE" >&2
	die "smoke test failed: Magnum's service user cannot store, read and delete a secret; see $BARBICAN_LOG"
fi
log "Barbican: smoke test passed (magnum stored, read and deleted a secret)"
log "barbican.sh: Barbican $BARBICAN_VERSION at $BARBICAN_URL (key-manager, region $MCB_REGION) after $SECONDS s"
