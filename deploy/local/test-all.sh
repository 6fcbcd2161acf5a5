#!/usr/bin/env bash
# `make test`: every tier (docs/testing.md), each stage timed, a time table at the end.
#
# The order follows what each stage shares. The end-to-end package starts as soon as the stack is up
# and runs E2E_PARALLEL tests at a time (they mostly wait on clusters); once its binary is built, the
# unit and integration tiers run next to it, then CAPO's simulator module and the scale smoke beside
# the peer smoke (a tenant of its own, peer_demo); the upgrade test and the churn smoke run next to
# them all, on the Magnum 23 instance. The fault matrix restarts services every other test uses: its
# preparation (creates only) starts once the other packages have ended, its first fault waits until
# the end-to-end package, the upgrade and churn tests and the peer smoke have.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=lib.sh
. deploy/local/lib.sh
GO=${GO:-go}
PKGS=${PKGS:-./...}
TEST_TIMEOUT=${TEST_TIMEOUT:-60m}
E2E_PARALLEL=${E2E_PARALLEL:-5}
LOG_DIR=$MCB_LOG_DIR
mkdir -p "$LOG_DIR"
TIMES=$LOG_DIR/test-times.tsv
: >"$TIMES"
T0=$SECONDS
# -trimpath: a clean clone in another folder reuses the build cache of the last run's unchanged
# packages; -ldflags=-w: no DWARF in the ~40 test binaries (the linker's largest part; panics and
# failures keep their file:line).
flags=(-race -count=1 -timeout "$TEST_TIMEOUT" -tags 'integration,e2e' -trimpath -ldflags=-w)

# stage NAME COMMAND...: runs COMMAND, records its start, end and exit status for the time table.
stage() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  printf '%s\t%d\t%d\t%d\n' "$name" "$((start - T0))" "$((SECONDS - T0))" "$rc" >>"$TIMES"
  echo "== $name: exit $rc after $((SECONDS - start))s (load $(cut -d' ' -f1-3 /proc/loadavg))"
  return "$rc"
}

# failed_packages: go test's verbose output of several packages (each printed whole when it ends) on
# standard input; prints the output of the packages that failed, without the === lines.
failed_packages() {
  awk '/^=== /{next} {buf = buf $0 "\n"} /^(ok|FAIL|\?)[ \t]/{if ($1 == "FAIL") printf "%s", buf; buf = ""} END{printf "%s", buf}'
}

# gotest NAME LOG ARGS...: go test -v ARGS into LOG; the pass/fail and TIMING lines to the terminal
# (prefixed with NAME, as stages interleave), the failed packages' whole output when it fails.
gotest() {
  local name=$1 log=$2 rc=0
  shift 2
  : >"$log"
  $GO test "${flags[@]}" -v "$@" >"$log" 2>&1 &
  local pid=$!
  tail -n +1 --pid "$pid" -f "$log" | grep --line-buffered -E 'TIMING|^\s+\S+: (CHURN|UPGRADE) |^--- (FAIL|SKIP)|^\s+--- FAIL|^(ok|FAIL)\s|^panic' | sed -u "s/^/[$name] /"
  wait "$pid" || rc=$?
  if ((rc != 0)); then
    echo "[$name] exit $rc; the failed packages' output ($log has all of it):"
    failed_packages <"$log"
  fi
  return "$rc"
}

# The machine's CPU use every 15 s (seconds from the start, percent busy), for the table: whether a
# slow stage waited on the CPU or on clusters.
CPU=$LOG_DIR/test-cpu.tsv
: >"$CPU"
(
  read -r _ u n s i w q sq st _ </proc/stat
  prev_busy=$((u + n + s + q + sq + st)) prev_total=$((u + n + s + i + w + q + sq + st))
  while sleep 15; do
    read -r _ u n s i w q sq st _ </proc/stat
    busy=$((u + n + s + q + sq + st)) total=$((u + n + s + i + w + q + sq + st))
    printf '%d\t%d\n' "$((SECONDS - T0))" "$(((busy - prev_busy) * 100 / (total - prev_total + 1)))" >>"$CPU"
    prev_busy=$busy prev_total=$total
  done
) &
cpu_pid=$!
trap 'kill "$cpu_pid" 2>/dev/null' EXIT

# The logs of this run only: an earlier run's fault matrix (another seed) or churn stays in LOG_DIR.
run_logs=("$LOG_DIR"/test-*.log "$LOG_DIR"/e2e.log)
table() {
  deploy/local/test-times.sh "$TIMES" "$CPU" "${run_logs[@]}"
}

# Lint (CPU) beside up (mostly waiting on services to answer); neither lets a test start when it fails.
stage lint make --no-print-directory lint &
lint_pid=$!
up_rc=0 lint_rc=0
stage up make --no-print-directory up || up_rc=$?
wait "$lint_pid" || lint_rc=$?
((up_rc == 0 && lint_rc == 0)) || { table; exit 1; }
stage "magnum driver (python)" /usr/bin/python3 -m unittest discover -s deploy/magnum-driver/tests
py_rc=$?

# PKGS is a list of package patterns: split on purpose.
# shellcheck disable=SC2086
mapfile -t all < <($GO list $PKGS) || exit 1
e2e=() others=()
for p in "${all[@]}"; do
  if [[ $p == */test/e2e ]]; then e2e+=("$p"); else others+=("$p"); fi
done

e2e_rc=0
if ((${#e2e[@]})); then
  : >"$LOG_DIR/e2e.log" # before the wait below reads it: no line of an earlier run
  stage "e2e (-parallel $E2E_PARALLEL)" gotest e2e "$LOG_DIR/e2e.log" -parallel "$E2E_PARALLEL" "${e2e[@]}" &
  e2e_pid=$!
fi
others_rc=0
if [[ -n ${e2e_pid:-} ]]; then
  # The end-to-end package is the longest stage and spends its time waiting on clusters: its binary
  # is built first, with both cores, and its tests wait on clusters while the other packages build.
  for _ in $(seq 900); do
    grep -q '^=== RUN' "$LOG_DIR/e2e.log" 2>/dev/null && break
    kill -0 "$e2e_pid" 2>/dev/null || break
    sleep 1
  done
  echo "== e2e tests started after $((SECONDS - T0))s; the other packages start now"
fi
# The upgrade test (the previous release builds clusters, this tree's bridge rendering differently
# takes over) and the churn test with the previous release as one of three replicas (a rolling
# upgrade half-way; 10 creates and 5 deletes while the leader is killed): each replaces the Magnum 23
# instance's bridge, held alone through a file lock the e2e package's tests of that instance share.
# Processes of their own next to the e2e package, started once its binary is built (theirs is the
# same build).
upgrade_rc=0 churn_rc=0
if [[ $PKGS == ./... && -n ${e2e_pid:-} ]]; then
  MCB_UPGRADE=1 stage "upgrade test (previous release, Magnum 23)" gotest upgrade "$LOG_DIR/test-upgrade.log" \
    -run '^TestBridgeUpgradeFromThePreviousRelease$' ./test/e2e &
  upgrade_pid=$!
  run_logs+=("$LOG_DIR/churn-3.log")
  MCB_CHURN=1 MCB_CHURN_INSTANCE=newest MCB_CHURN_PREVIOUS=1 MCB_CHURN_CLUSTERS=10 MCB_CHURN_DELETES=5 MCB_CHURN_SEED=3 \
    stage "churn smoke (previous release as a replica, Magnum 23)" gotest churn "$LOG_DIR/churn-3.log" \
    -run '^TestChurnWithReplicas$' ./test/e2e &
  churn_pid=$!
fi
if ((${#others[@]})); then
  stage "unit + integration + e2e packages" gotest pkgs "$LOG_DIR/test-packages.log" -p 2 "${others[@]}" || others_rc=$?
fi
faults_rc=0 peer_rc=0
if [[ $PKGS == ./... ]]; then
  # The side by side with the peer conductor, so that it cannot rot, then the adoption of the
  # peer's clusters: next to the two below (they mostly wait on their conductors and clusters), so
  # that they have ended when the end-to-end package has. One peer at a time.
  run_logs+=("$LOG_DIR/adoption.log")
  (
    stage "bench-peer smoke" make --no-print-directory bench-peer-smoke GO="$GO"
    bench=$?
    stage "adoption of the peer's clusters" make --no-print-directory test-adoption GO="$GO"
    exit $((bench | $?))
  ) &
  peer_pid=$!
  # CAPO's own service code against the OpenStack simulator: a module of its own (CAPO's dependencies
  # stay out of the bridge's go.mod), so ./... does not reach it.
  (cd test/caposim && stage "caposim (CAPO against the simulator)" gotest caposim "$LOG_DIR/test-caposim.log" ./...) || others_rc=$?
  # The scale harness with a handful of clusters, so that `make bench-scale` cannot rot.
  stage "bench-scale smoke" make --no-print-directory bench-scale-smoke GO="$GO" || others_rc=$?
fi

if [[ $PKGS == ./... ]]; then
  # A rotating part of the matrix (every fault and every operation, each operation once), dealt by
  # the commit: successive commits cover different cells. `make test-faults` runs the whole matrix.
  seed=$((16#$(git rev-parse --short=7 HEAD 2>/dev/null || echo 1) % 100000))
  run_logs+=("$LOG_DIR/fault-matrix-$seed.log")
  gate=$(mktemp -u "${TMPDIR:-/tmp}/mcb-e2e-ended.XXXXXX")
  stage "fault matrix (rotating, seed $seed)" make --no-print-directory test-faults GO="$GO" FAULT_SEED="$seed" \
    FAULT_MATRIX=rotating FAULTS_START_AFTER="$gate" &
  faults_pid=$!
fi
if [[ -n ${e2e_pid:-} ]]; then
  wait "$e2e_pid" || e2e_rc=$?
fi
if [[ -n ${peer_pid:-} ]]; then
  wait "$peer_pid" || peer_rc=$?
fi
if [[ -n ${upgrade_pid:-} ]]; then
  wait "$upgrade_pid" || upgrade_rc=$?
fi
if [[ -n ${churn_pid:-} ]]; then
  wait "$churn_pid" || churn_rc=$?
fi
if [[ -n ${faults_pid:-} ]]; then
  touch "$gate"
  wait "$faults_pid" || faults_rc=$?
  rm -f "$gate"
fi

smokes_rc=$peer_rc

table
echo "== make test: python $py_rc, packages $others_rc, e2e $e2e_rc, upgrade $upgrade_rc, churn $churn_rc, fault matrix $faults_rc, smokes $smokes_rc"
((py_rc == 0 && others_rc == 0 && e2e_rc == 0 && upgrade_rc == 0 && churn_rc == 0 && faults_rc == 0 && smokes_rc == 0))
