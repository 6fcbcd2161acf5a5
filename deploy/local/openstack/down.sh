#!/usr/bin/env bash
# Stop exactly what deploy/local/openstack/up.sh started, going by its PID files, newest service
# first. A MariaDB or RabbitMQ that was already running before up.sh (it has no PID file) is left
# alone. Data (databases, Keystone keys, configuration) is kept; up.sh starts everything again.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=stack.env
. "$HERE/stack.env"

require_root
[ -d "$MCB_RUN_DIR" ] || {
	log "down.sh: nothing to stop ($MCB_RUN_DIR does not exist)"
	exit 0
}
if [ -d "$MCB_LOG_DIR" ]; then exec > >(tee -a "$MCB_LOG_DIR/openstack-down.log") 2>&1; fi

stopped=0
# Other PID files in $MCB_RUN_DIR (the management cluster's) are not ours and are left alone.
# RabbitMQ before epmd (rabbitmqctl needs epmd), MariaDB last (Keystone and magnum use it).
for name in magnum-api barbican-api fake-openstack keystone rabbitmq epmd mariadb; do
	if [ -e "$(pidfile "$name")" ]; then
		stop_service "$name"
		stopped=$((stopped + 1))
	fi
done
log "down.sh: handled $stopped PID file(s) in $SECONDS s; data kept"
