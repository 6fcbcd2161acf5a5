#!/usr/bin/env bash
# Stop exactly what newest-up.sh started: magnum-api 23 (by its PID file) and the mounts it made in
# the chroot (by its list). The chroot, database, vhost and Keystone region are kept; newest-up.sh
# brings the same API back in seconds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
# shellcheck source=stack.env
. "$HERE/stack.env"

require_root
MOUNTS=$MCB_RUN_DIR/magnum-newest.mounts
if [ -d "$MCB_LOG_DIR" ]; then exec > >(tee -a "$MCB_LOG_DIR/openstack-newest-down.log") 2>&1; fi

stop_service magnum-api-newest
if [ -s "$MOUNTS" ]; then
	# Deepest first; a lazy unmount when something (a CLI run in the chroot) still holds one.
	sort -r "$MOUNTS" | while read -r m; do
		if mountpoint -q "$m"; then
			umount "$m" 2>/dev/null || umount -l "$m"
			log "unmounted $m"
		fi
	done
fi
rm -f "$MOUNTS"
log "newest-down.sh: done in $SECONDS s; chroot and data kept"
