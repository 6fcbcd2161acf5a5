#!/usr/bin/env bash
# keystone.sh stop|start: stops or starts the local stack's Keystone alone (the fault tests stop the
# identity service for a while; up.sh would also check packages and configuration).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=stack.env
. "$HERE/stack.env"
require_root
UWSGI=/usr/bin/uwsgi_python3
[ -x "$UWSGI" ] || UWSGI=/usr/bin/uwsgi-core
case "${1:-}" in
stop) stop_service keystone ;;
start)
	if service_running keystone; then
		log "Keystone: running (pid $(service_pid keystone))"
		exit 0
	fi
	start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile keystone)" \
		--chdir /var/lib/keystone --exec "$UWSGI" -- --ini "$MCB_ETC_DIR/keystone-uwsgi.ini"
	wait_http keystone "$KEYSTONE_URL" 90 "$MCB_LOG_DIR/keystone.log"
	log "Keystone: started (pid $(service_pid keystone))"
	;;
*) die "usage: $0 stop|start" ;;
esac
