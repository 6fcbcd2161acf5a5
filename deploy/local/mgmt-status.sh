#!/usr/bin/env bash
# Shows each component of the local management cluster: PID, resident memory and CPU time.
# Exit status 0 only when all of them run.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
log_prefix="mgmt: "

rc=0 total=0
printf '%-24s %8s %10s %10s\n' COMPONENT PID RSS_MiB CPU_s
for c in etcd kube-apiserver kube-controller-manager capi kcp cabpk capd; do
  if pid=$(component_pid "$c"); then
    rss_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    # utime+stime in clock ticks (fields 14 and 15 of /proc/<pid>/stat; comm has no spaces here)
    cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$pid/stat")
    total=$((total + rss_kib))
    printf '%-24s %8s %10d %10s\n' "$c" "$pid" $((rss_kib / 1024)) "$cpu"
  else
    printf '%-24s %8s\n' "$c" "stopped"
    rc=1
  fi
done
printf '%-24s %8s %10d\n' total "" $((total / 1024))
exit $rc
