#!/usr/bin/env bash
# Bring up the OpenStack half of the local stack on loopback, from Debian bookworm packages:
# MariaDB and RabbitMQ (only if not already running), Keystone, magnum-api 15.0.1 and Barbican
# (barbican.sh) under uwsgi, the fake Glance/Nova/Neutron (cmd/fake-openstack) and the bridge's
# magnum.drivers entry point.
# There is no magnum-conductor: magnum-capi-bridge takes its place.
#
# Idempotent: a second run finds everything in place and changes nothing (no duplicate Keystone
# objects); a changed config file or binary restarts only the service concerned. Settings: stack.env.
# PID files of what it starts: $MCB_RUN_DIR; logs: $MCB_LOG_DIR. Stop with down.sh.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=stack.env
. "$HERE/stack.env"

require_root
umask 022
install -d -m 0755 "$MCB_STATE_DIR" "$MCB_RUN_DIR" "$MCB_LOG_DIR" "$MCB_ETC_DIR" "$MCB_LIB_DIR"
exec > >(tee -a "$MCB_LOG_DIR/openstack-up.log") 2>&1
log "up.sh: start (log: $MCB_LOG_DIR/openstack-up.log)"

STEP_START=$SECONDS
step() {
	log "---- $* (+$((SECONDS - STEP_START)) s)"
}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------------------------------------
step "packages"
apt_install_missing deploy/local/openstack/up.sh mariadb-server rabbitmq-server keystone magnum-api python3-magnum \
	uwsgi-core uwsgi-plugin-python3 python3-pymysql python3-openstackclient python3-magnumclient curl
MAGNUM_VERSION=$(dpkg-query -W -f='${Version}' python3-magnum)
KEYSTONE_VERSION=$(dpkg-query -W -f='${Version}' keystone)
UWSGI=/usr/bin/uwsgi_python3
[ -x "$UWSGI" ] || UWSGI=/usr/bin/uwsgi-core

# ---------------------------------------------------------------------------------------------
step "MariaDB"
if mysqladmin -uroot --connect-timeout=2 ping >/dev/null 2>&1; then
	if service_running mariadb; then
		log "MariaDB: running (pid $(service_pid mariadb), started by up.sh)"
	else
		log "MariaDB: already running, not started by up.sh: left alone"
	fi
else
	refuse_foreign_port mariadb 3306
	if pgrep -x mariadbd >/dev/null; then
		die "a mariadbd process runs but does not answer mysqladmin ping; up.sh will not start a second one"
	fi
	install -d -o mysql -g mysql -m 0755 /run/mysqld
	[ -e "$MCB_LOG_DIR/mariadb.err" ] || install -o mysql -g adm -m 0640 /dev/null "$MCB_LOG_DIR/mariadb.err"
	start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile mariadb)" \
		--chdir /var/lib/mysql --exec /usr/sbin/mariadbd -- --user=mysql \
		--bind-address=127.0.0.1 --log-error="$MCB_LOG_DIR/mariadb.err"
	for ((i = 0; i < 240; i++)); do
		mysqladmin -uroot --connect-timeout=2 ping >/dev/null 2>&1 && break
		service_running mariadb || die "MariaDB died during start-up; see $MCB_LOG_DIR/mariadb.err"
		sleep 0.25
	done
	mysqladmin -uroot --connect-timeout=2 ping >/dev/null 2>&1 ||
		die "MariaDB did not answer within 60 s; see $MCB_LOG_DIR/mariadb.err"
	log "MariaDB: started (pid $(service_pid mariadb))"
fi
port_in_use 3306 || die "MariaDB answers on its socket but not on 127.0.0.1:3306, where Keystone and magnum connect"

{
	for db in keystone magnum; do
		echo "CREATE DATABASE IF NOT EXISTS $db CHARACTER SET utf8 COLLATE utf8_general_ci;"
	done
	for host in localhost 127.0.0.1; do
		for pair in "keystone:$KEYSTONE_DB_PASSWORD" "magnum:$MAGNUM_DB_PASSWORD"; do
			user=${pair%%:*} pw=$(sql_quote "${pair#*:}")
			echo "CREATE USER IF NOT EXISTS '$user'@'$host' IDENTIFIED BY $pw;"
			echo "ALTER USER '$user'@'$host' IDENTIFIED BY $pw;"
			echo "GRANT ALL PRIVILEGES ON $user.* TO '$user'@'$host';"
		done
	done
} | sql
log "MariaDB: databases keystone, magnum and their users are in place"

# ---------------------------------------------------------------------------------------------
step "RabbitMQ"
if port_in_use "$RABBIT_PORT"; then
	if service_running rabbitmq; then
		log "RabbitMQ: running (pid $(service_pid rabbitmq), started by up.sh)"
	else
		log "RabbitMQ: already listening on :$RABBIT_PORT, not started by up.sh: left alone"
	fi
else
	if pgrep -u rabbitmq -f beam.smp >/dev/null; then
		die "a RabbitMQ node runs but does not listen on :$RABBIT_PORT; up.sh will not start a second one"
	fi
	# Any rabbitmqctl call starts epmd; note whether it ran before, so down.sh stops only ours.
	EPMD_WAS_RUNNING=0
	port_in_use 4369 && EPMD_WAS_RUNNING=1
	# No RabbitMQ is running, so writing its config cannot disturb one. Keep an existing config.
	for f in rabbitmq.conf rabbitmq-env.conf; do
		if [ ! -s "/etc/rabbitmq/$f" ]; then
			render "$HERE/templates/$f" >"$TMP/$f"
			install_file "$TMP/$f" "/etc/rabbitmq/$f" 644 root:root || true
			log "RabbitMQ: wrote /etc/rabbitmq/$f"
		fi
	done
	# A PID file left by an earlier node would be taken for the new one below.
	for f in /var/lib/rabbitmq/mnesia/*.pid; do
		if [ -e "$f" ] && ! kill -0 "$(cat "$f")" 2>/dev/null; then rm -f "$f"; fi
	done
	(cd /var/lib/rabbitmq && su rabbitmq -s /bin/sh -c \
		"export ERL_EPMD_ADDRESS=$MCB_HOST; exec /usr/sbin/rabbitmq-server -detached") ||
		die "RabbitMQ did not start; see /var/log/rabbitmq/"
	RABBIT_PIDFILE=""
	for ((i = 0; i < 120; i++)); do
		RABBIT_PIDFILE=$(find /var/lib/rabbitmq/mnesia -maxdepth 1 -name '*.pid' 2>/dev/null | head -n1)
		[ -n "$RABBIT_PIDFILE" ] && break
		sleep 0.5
	done
	[ -n "$RABBIT_PIDFILE" ] || die "RabbitMQ wrote no PID file within 60 s; see /var/log/rabbitmq/"
	rabbitmqctl -q wait --timeout 120 "$RABBIT_PIDFILE" || die "RabbitMQ did not finish booting; see /var/log/rabbitmq/"
	cp "$RABBIT_PIDFILE" "$(pidfile rabbitmq)"
	if [ "$EPMD_WAS_RUNNING" = 0 ]; then
		ss -Hltnp "( sport = :4369 )" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1 >"$(pidfile epmd)"
	fi
	log "RabbitMQ: started (pid $(service_pid rabbitmq))"
fi

# ---------------------------------------------------------------------------------------------
step "Keystone"
KEYSTONE_CHANGED=0
keep_original /etc/keystone/keystone.conf
render "$HERE/templates/keystone.conf" >"$TMP/keystone.conf"
install_file "$TMP/keystone.conf" /etc/keystone/keystone.conf 640 root:keystone && KEYSTONE_CHANGED=1
render "$HERE/templates/keystone-uwsgi.ini" >"$TMP/keystone-uwsgi.ini"
install_file "$TMP/keystone-uwsgi.ini" "$MCB_ETC_DIR/keystone-uwsgi.ini" 644 root:root && KEYSTONE_CHANGED=1
[ -e "$MCB_LOG_DIR/keystone.log" ] || install -o keystone -g keystone -m 0640 /dev/null "$MCB_LOG_DIR/keystone.log"

# The schema only changes with the package, so a stamp saves keystone-manage's start-up time on
# every later run; the table count catches a database that was dropped behind the stamp's back.
KEYSTONE_TABLES=$(echo "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='keystone';" | sql)
if [ "$KEYSTONE_TABLES" = 0 ] || [ "$(cat "$MCB_STATE_DIR/keystone-db.stamp" 2>/dev/null)" != "$KEYSTONE_VERSION" ]; then
	log "Keystone: db_sync"
	su keystone -s /bin/sh -c 'keystone-manage db_sync'
	echo "$KEYSTONE_VERSION" >"$MCB_STATE_DIR/keystone-db.stamp"
fi
for repo in fernet credential; do
	dir=/etc/keystone/$repo-keys
	if [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
		log "Keystone: ${repo}_setup"
		keystone-manage "${repo}_setup" --keystone-user keystone --keystone-group keystone
	fi
done
keystone_bootstrap() {
	log "Keystone: bootstrap (admin user, roles, region, identity endpoints)"
	# keystone-manage reads the password from OS_BOOTSTRAP_PASSWORD, which keeps it out of `ps`.
	OS_BOOTSTRAP_PASSWORD=$ADMIN_PASSWORD su keystone -s /bin/sh -c "keystone-manage bootstrap \
		--bootstrap-username admin --bootstrap-project-name admin --bootstrap-role-name admin \
		--bootstrap-service-name keystone --bootstrap-region-id $MCB_REGION \
		--bootstrap-admin-url $KEYSTONE_URL/ --bootstrap-public-url $KEYSTONE_URL/ \
		--bootstrap-internal-url $KEYSTONE_URL/"
}
ADMIN_EXISTS=$(echo "SELECT COUNT(*) FROM keystone.local_user WHERE name='admin';" | sql)
[ "$ADMIN_EXISTS" != 0 ] || keystone_bootstrap

if service_running keystone && [ "$KEYSTONE_CHANGED" = 1 ]; then
	log "Keystone: configuration changed, restarting"
	stop_service keystone
fi
if service_running keystone; then
	log "Keystone: running (pid $(service_pid keystone))"
else
	refuse_foreign_port keystone "$KEYSTONE_PORT"
	start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile keystone)" \
		--chdir /var/lib/keystone --exec "$UWSGI" -- --ini "$MCB_ETC_DIR/keystone-uwsgi.ini"
	wait_http keystone "$KEYSTONE_URL" 90 "$MCB_LOG_DIR/keystone.log"
	log "Keystone: started (pid $(service_pid keystone)) on $KEYSTONE_URL"
fi

# ---------------------------------------------------------------------------------------------
step "OpenStack simulator (Glance, Nova, Neutron, Octavia)"
FAKE_BIN=$MCB_LIB_DIR/fake-openstack
FAKE_CHANGED=0
if [ -n "$FAKE_OPENSTACK_BIN" ]; then
	cp "$FAKE_OPENSTACK_BIN" "$TMP/fake-openstack"
else
	GO=$(command -v go || echo /usr/local/go/bin/go)
	[ -x "$GO" ] || die "no Go toolchain to build cmd/fake-openstack; install Go or set FAKE_OPENSTACK_BIN"
	(cd "$REPO" && "$GO" build -trimpath -o "$TMP/fake-openstack" ./cmd/fake-openstack)
fi
install_file "$TMP/fake-openstack" "$FAKE_BIN" 755 root:root && FAKE_CHANGED=1
# --keystone-url: the fake keeps Nova server groups per project of the caller's token.
FAKE_ARGS=(--image-listen "$MCB_HOST:$FAKE_IMAGE_PORT" --compute-listen "$MCB_HOST:$FAKE_COMPUTE_PORT"
	--network-listen "$MCB_HOST:$FAKE_NETWORK_PORT" --request-log "$MCB_LOG_DIR/fake-openstack-requests.jsonl"
	--load-balancer-listen "$MCB_HOST:$FAKE_LB_PORT" --inspect-listen "$MCB_HOST:$FAKE_INSPECT_PORT"
	--volume-listen "$MCB_HOST:$FAKE_VOLUME_PORT" --instance-quota "$FAKE_INSTANCE_QUOTA" --keystone-url "$KEYSTONE_URL"
	--boot --public-cidr "$FAKE_PUBLIC_CIDR")
if [ -n "$FAKE_OPENSTACK_SEED" ]; then
	"$FAKE_BIN" --seed "$FAKE_OPENSTACK_SEED" --print-seed >/dev/null || die "bad seed $FAKE_OPENSTACK_SEED"
	install_file "$FAKE_OPENSTACK_SEED" "$MCB_ETC_DIR/fake-openstack-seed.json" 644 root:root && FAKE_CHANGED=1
	FAKE_ARGS+=(--seed "$MCB_ETC_DIR/fake-openstack-seed.json")
else
	rm -f "$MCB_ETC_DIR/fake-openstack-seed.json"
fi
printf '%s\n' "${FAKE_ARGS[@]}" >"$TMP/fake-openstack.args"
install_file "$TMP/fake-openstack.args" "$MCB_STATE_DIR/fake-openstack.args" 644 root:root && FAKE_CHANGED=1
for f in fake-openstack.log fake-openstack-requests.jsonl; do
	[ -e "$MCB_LOG_DIR/$f" ] || install -o nobody -g nogroup -m 0644 /dev/null "$MCB_LOG_DIR/$f"
done
if service_running fake-openstack && [ "$FAKE_CHANGED" = 1 ]; then
	log "fake-openstack: binary, seed or flags changed, restarting"
	stop_service fake-openstack
fi
if service_running fake-openstack; then
	log "fake-openstack: running (pid $(service_pid fake-openstack))"
else
	for port in "$FAKE_IMAGE_PORT" "$FAKE_COMPUTE_PORT" "$FAKE_NETWORK_PORT" "$FAKE_LB_PORT" "$FAKE_INSPECT_PORT" "$FAKE_VOLUME_PORT"; do
		refuse_foreign_port fake-openstack "$port"
	done
	start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile fake-openstack)" \
		--chuid nobody:nogroup --chdir / --output "$MCB_LOG_DIR/fake-openstack.log" \
		--exec "$FAKE_BIN" -- "${FAKE_ARGS[@]}"
	wait_http fake-openstack "http://$MCB_HOST:$FAKE_IMAGE_PORT/v2/schemas/image" 30 "$MCB_LOG_DIR/fake-openstack.log"
	log "fake-openstack: started (pid $(service_pid fake-openstack)) on :$FAKE_IMAGE_PORT :$FAKE_COMPUTE_PORT :$FAKE_NETWORK_PORT :$FAKE_LB_PORT :$FAKE_VOLUME_PORT, inspection :$FAKE_INSPECT_PORT"
fi

# ---------------------------------------------------------------------------------------------
step "Keystone identities and catalog"
# Users whose password (the newest row; Keystone keeps earlier ones) is hashed at another cost than
# keystone.conf's (stored before it changed): identity.py sets their passwords again.
MCB_STALE_PASSWORD_HASHES=$(mysql -N -uroot keystone -e \
	"SELECT lu.user_id FROM local_user lu JOIN password p ON p.local_user_id = lu.id
	 WHERE p.created_at_int = (SELECT MAX(created_at_int) FROM password WHERE local_user_id = lu.id)
	 AND p.password_hash NOT LIKE '\$2b\$04\$%'" | tr '\n' ' ')
export MCB_STALE_PASSWORD_HASHES
set +e
/usr/bin/python3 "$HERE/identity.py"
rc=$?
set -e
if [ $rc = 3 ]; then
	# The admin password in stack.env differs from Keystone's: bootstrap resets it.
	keystone_bootstrap
	/usr/bin/python3 "$HERE/identity.py"
elif [ $rc != 0 ]; then
	die "identity.py failed (exit $rc)"
fi

install -d -m 0755 /etc/openstack
render "$HERE/templates/clouds.yaml" >"$TMP/clouds.yaml"
if [ -e /etc/openstack/clouds.yaml ] && ! grep -q 'deploy/local/openstack/up.sh' /etc/openstack/clouds.yaml; then
	keep_original /etc/openstack/clouds.yaml
	log "clouds.yaml: the previous /etc/openstack/clouds.yaml is kept as clouds.yaml.orig-mcb"
fi
if install_file "$TMP/clouds.yaml" /etc/openstack/clouds.yaml 644 root:root; then
	log "clouds.yaml: written"
fi

# ---------------------------------------------------------------------------------------------
step "magnum-api"
MAGNUM_CHANGED=0
DRIVER_OUT=$(/usr/bin/python3 "$REPO/deploy/magnum-driver/install.py")
log "magnum driver: $DRIVER_OUT"
case $DRIVER_OUT in installed:*) MAGNUM_CHANGED=1 ;; esac

# magnum.conf is shared with magnum-capi-bridge. Lines below the marker are local additions: keep them.
MARKER='# ---- lines below this marker are kept by deploy/local/openstack/up.sh ----'
keep_original /etc/magnum/magnum.conf
{
	render "$HERE/templates/magnum.conf"
	echo "$MARKER"
	if [ -e /etc/magnum/magnum.conf ] && grep -qxF -- "$MARKER" /etc/magnum/magnum.conf; then
		awk -v marker="$MARKER" 'kept { print } $0 == marker { kept = 1 }' /etc/magnum/magnum.conf
	fi
} >"$TMP/magnum.conf"
install_file "$TMP/magnum.conf" /etc/magnum/magnum.conf 640 root:magnum && MAGNUM_CHANGED=1
render "$HERE/templates/magnum-api-uwsgi.ini" >"$TMP/magnum-api-uwsgi.ini"
install_file "$TMP/magnum-api-uwsgi.ini" "$MCB_ETC_DIR/magnum-api-uwsgi.ini" 644 root:root && MAGNUM_CHANGED=1
[ -e "$MCB_LOG_DIR/magnum-api.log" ] || install -o magnum -g magnum -m 0640 /dev/null "$MCB_LOG_DIR/magnum-api.log"
install -d -o magnum -g magnum -m 0750 /var/lib/magnum /var/lib/magnum/lock

MAGNUM_TABLES=$(echo "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='magnum';" | sql)
if [ "$MAGNUM_TABLES" = 0 ] || [ "$(cat "$MCB_STATE_DIR/magnum-db.stamp" 2>/dev/null)" != "$MAGNUM_VERSION" ]; then
	log "magnum: magnum-db-manage upgrade"
	(cd /var/lib/magnum && su magnum -s /bin/sh -c 'magnum-db-manage upgrade')
	echo "$MAGNUM_VERSION" >"$MCB_STATE_DIR/magnum-db.stamp"
fi

if service_running magnum-api && [ "$MAGNUM_CHANGED" = 1 ]; then
	log "magnum-api: configuration or driver changed, restarting"
	stop_service magnum-api
fi
if service_running magnum-api; then
	log "magnum-api: running (pid $(service_pid magnum-api))"
else
	refuse_foreign_port magnum-api "$MAGNUM_API_PORT"
	start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile magnum-api)" \
		--chdir /var/lib/magnum --exec "$UWSGI" -- --ini "$MCB_ETC_DIR/magnum-api-uwsgi.ini"
	wait_http magnum-api "http://$MCB_HOST:$MAGNUM_API_PORT/" 90 "$MCB_LOG_DIR/magnum-api.log"
	log "magnum-api: started (pid $(service_pid magnum-api)) on $MAGNUM_URL"
fi

# ---------------------------------------------------------------------------------------------
step "Barbican"
# Magnum's default certificate manager, for a Magnum configured with cert_manager_type = barbican.
"$HERE/barbican.sh" up

# ---------------------------------------------------------------------------------------------
step "smoke test"
# The whole chain as a tenant sees it: clouds.yaml, Keystone, magnum-api's auth middleware, its DB,
# and the trustee-domain lookup magnum-api does for every non-admin list.
if ! SMOKE=$(/usr/bin/openstack --os-cloud devstack coe cluster template list -f value -c uuid 2>&1); then
	printf '%s\n' "$SMOKE" >&2
	die "smoke test failed: openstack --os-cloud devstack coe cluster template list; see $MCB_LOG_DIR/magnum-api.log"
fi
log "smoke test: demo sees $(printf '%s' "$SMOKE" | grep -c . || true) cluster template(s)"

# ---------------------------------------------------------------------------------------------
step "done"
for name in mariadb rabbitmq epmd keystone fake-openstack magnum-api barbican-api; do
	if service_running "$name"; then log "  $name: pid $(service_pid "$name") ($(pidfile "$name"))"; fi
done
cat <<EOF

OpenStack half of the local stack is up after $SECONDS s (stop it with deploy/local/openstack/down.sh).
  Keystone        $KEYSTONE_URL            (region $MCB_REGION)
  magnum-api      $MAGNUM_URL   (15.0.1, uwsgi; no magnum-conductor: the bridge consumes its RPC)
  Barbican        $BARBICAN_URL/v1      (key-manager, simple_crypto; for cert_manager_type = barbican)
  simulated       Glance http://$MCB_HOST:$FAKE_IMAGE_PORT   Nova http://$MCB_HOST:$FAKE_COMPUTE_PORT/v2.1   Neutron http://$MCB_HOST:$FAKE_NETWORK_PORT   Octavia http://$MCB_HOST:$FAKE_LB_PORT   Cinder http://$MCB_HOST:$FAKE_VOLUME_PORT/v3
                  (what CAPO made, per project: curl http://$MCB_HOST:$FAKE_INSPECT_PORT/projects/<project id>/resources)
  RabbitMQ        rabbit://$RABBIT_USER:***@$MCB_HOST:$RABBIT_PORT/  (exchange magnum, topic magnum-conductor)
  magnum.conf     /etc/magnum/magnum.conf (also read by magnum-capi-bridge)
  clouds          /etc/openstack/clouds.yaml: devstack (demo), devstack-alt (alt_demo), devstack-admin (admin)
  logs            $MCB_LOG_DIR/{keystone,magnum-api,barbican-api,fake-openstack}.log, fake-openstack-requests.jsonl

Try it:
  openstack --os-cloud devstack coe cluster template create k8s-v1.36 --coe kubernetes \\
      --image ubuntu-2404-kube-v1.36.3 --external-network public \\
      --flavor m1.medium --master-flavor m1.medium --keypair default \\
      --network-driver calico --labels kube_tag=v1.36.3
  openstack --os-cloud devstack coe cluster create demo-1 --cluster-template k8s-v1.36 \\
      --master-count 1 --node-count 2
  openstack --os-cloud devstack coe cluster list     # empty until magnum-capi-bridge consumes the cast
Images: ubuntu-2404-kube-v1.35.4, ubuntu-2404-kube-v1.36.3 (and ubuntu-2404-kube-v1.36.3-noboot, whose
servers never boot); flavors: m1.small, m1.medium, m1.large; external network: public (floating IPs
in $FAKE_PUBLIC_CIDR); keypair: default (every user).
EOF
