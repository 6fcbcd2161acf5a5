#!/usr/bin/env bash
# Starts the machine's RabbitMQ, MariaDB and PostgreSQL if they are installed but stopped, and installs
# them when absent. These are the machine's own services: the stack's down.sh never stops them.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
ensure_dirs
export DEBIAN_FRONTEND=noninteractive
need=()
command -v rabbitmq-server >/dev/null || need+=(rabbitmq-server)
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq
  apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! mysqladmin --protocol=socket ping >/dev/null 2>&1; then
  log "starting MariaDB"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql --bind-address=127.0.0.1
  wait_for MariaDB 60 mysqladmin --protocol=socket ping
fi
if ! rabbitmqctl -q status >/dev/null 2>&1; then
  log "starting RabbitMQ"
  rabbitmq-server -detached
  # await_startup fails at once while the node has not registered with epmd yet: wait for that first.
  wait_for "RabbitMQ's node" 60 rabbitmqctl -q ping
  rabbitmqctl -q await_startup --timeout 120 >/dev/null
fi
if ! pg_isready -q -h 127.0.0.1 2>/dev/null; then
  log "starting PostgreSQL"
  pg_versions=(/etc/postgresql/*)
  pg_ctlcluster --skip-systemctl-redirect "${pg_versions[0]##*/}" main start || true
  wait_for PostgreSQL 60 pg_isready -q -h 127.0.0.1
fi
# Tests connect as root over TCP with an empty password (MariaDB) and as postgres with trust auth.
mysql --protocol=socket -uroot -e "SELECT 1" >/dev/null
log "RabbitMQ, MariaDB and PostgreSQL are running"
