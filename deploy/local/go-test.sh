#!/usr/bin/env bash
# `make test`'s Go stage: the end-to-end package starts at once, next to all the other packages, and
# runs E2E_PARALLEL of its tests at a time; the fault matrix follows it (its preparation overlapping
# the end-to-end tests' end). Its tests spend their minutes waiting on clusters, so go
# test's default (-parallel = GOMAXPROCS = 2 here), and its place behind the other packages in a `-p 2`
# run, left the machine idle for most of the stage.
set -uo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
PKGS=${PKGS:-./...}
TEST_TIMEOUT=${TEST_TIMEOUT:-60m}
E2E_PARALLEL=${E2E_PARALLEL:-4}
flags=(-race -count=1 -timeout "$TEST_TIMEOUT")

mapfile -t all < <($GO list $PKGS) || exit 1
e2e=() others=()
for p in "${all[@]}"; do
  if [[ $p == */test/e2e ]]; then e2e+=("$p"); else others+=("$p"); fi
done

t0=$SECONDS
e2e_rc=0
if ((${#e2e[@]})); then
  # Verbose, so each step's TIMING line is on record: the whole log goes to $log, the TIMING and
  # pass/fail lines to the terminal (prefixed, as the two streams interleave), and all of it when it fails.
  log=${MCB_LOG_DIR:-/var/log/magnum-capi-bridge}/e2e.log
  mkdir -p "$(dirname "$log")"
  : >"$log" # before tail opens it: the background job's redirection may come later
  (
    $GO test "${flags[@]}" -v -parallel "$E2E_PARALLEL" "${e2e[@]}" >"$log" 2>&1 &
    gopid=$!
    tail -n +1 --pid "$gopid" -f "$log" | grep --line-buffered -E 'TIMING|^\s*--- (PASS|FAIL|SKIP)|^(ok|FAIL|PASS)\b|^panic' | sed -u 's/^/[e2e] /'
    wait "$gopid"; rc=$?
    if ((rc != 0)); then echo "[e2e] exit $rc; the whole log ($log) without the === lines:"; grep -v '^=== ' "$log"; fi
    exit "$rc"
  ) &
  e2e_pid=$!
fi
others_rc=0
if ((${#others[@]})); then
  $GO test "${flags[@]}" -p 2 "${others[@]}" || others_rc=$?
fi
# CAPO's own service code against the OpenStack simulator: a module of its own (CAPO's dependencies
# stay out of the bridge's go.mod), so ./... does not reach it.
if [[ $PKGS == ./... ]]; then
  (cd test/caposim && $GO test "${flags[@]}" ./...) || others_rc=$?
  # The scale harness with a handful of clusters (its own apiserver, database and vhost; ~3 min), so
  # that `make bench-scale` cannot rot.
  make --no-print-directory bench-scale-smoke GO="$GO" || others_rc=$?
fi
echo "== go test (all packages but the end-to-end one): exit $others_rc after $((SECONDS - t0))s"
# The fault matrix (`make test-faults`) restarts services every other test uses, so it injects no
# fault before the end-to-end package has ended; but its preparation (a dozen clusters made through
# the CLI, ~5 min) only creates, and overlaps the end-to-end tests' last minutes from here.
faults_rc=0
if [[ $PKGS == ./... && ${MCB_SKIP_FAULTS:-0} != 1 ]]; then
  gate=$(mktemp -u "${TMPDIR:-/tmp}/mcb-e2e-ended.XXXXXX")
  MCB_FAULTS_START_AFTER=$gate make --no-print-directory test-faults GO="$GO" &
  faults_pid=$!
fi
if ((${#e2e[@]})); then
  wait "$e2e_pid" || e2e_rc=$?
  echo "== go test ${e2e[*]} (-parallel $E2E_PARALLEL): exit $e2e_rc after $((SECONDS - t0))s"
fi
if [[ -n ${faults_pid:-} ]]; then
  touch "$gate"
  wait "$faults_pid" || faults_rc=$?
  rm -f "$gate"
  echo "== fault matrix: exit $faults_rc after $((SECONDS - t0))s"
fi
((others_rc == 0 && e2e_rc == 0 && faults_rc == 0))
