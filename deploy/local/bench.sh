#!/usr/bin/env bash
# `make bench`: the micro-benchmarks, then the scale harness (test/scale) and the side by side with the
# peer (test/peer), and one closing table — figure | bridge | peer | ratio | goal — with the commands.
#   BENCHTIME (2s)          -benchtime of the micro-benchmarks
#   BENCH_SCALE_CLUSTERS    N of the scale harness (default: the Makefile's SCALE_CLUSTERS, 100)
#   BENCH_SCALE_SOAK        its soak of steady churn (default: none; e.g. 30m)
#   BENCH_SCALE_KEYS (800)  the bridge's pregenerated key pool in the harness: an operator who expects
#                           bursts of 200 creates sizes it for them (4 keys a create); empty: the default, 32
#   BENCH_PEER_CLUSTERS (5) creates per conductor in the side by side; BENCH_PEER=0 leaves it out
# The side by side needs `make up`; without the stack it is left out and the table says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=lib.sh
. deploy/local/lib.sh
out=$(mktemp -d "${TMPDIR:-/tmp}/mcb-bench.XXXXXX")
table=$out/table.tsv
: >"$table"
commands=()

# -p 1: one package's benchmarks at a time; by default go test runs two test binaries at once here,
# and a benchmark that shares the cores with another package's measures both.
cmd=(go test -tags 'integration,e2e' -p 1 -run '^$' -bench . -benchmem -benchtime "${BENCHTIME:-2s}" -count 1 ./internal/... ./test/...)
commands+=("${cmd[*]}")
echo "# command: ${cmd[*]}"
echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(go version)"
"${cmd[@]}" 2>&1 | grep -E '^(Benchmark|ok|FAIL|---|#|goos|pkg|PASS)' | tee "$out/micro.txt" || true

# The RPC figures against raw amqp091 loops on the same broker (internal/rpc/bench_test.go). The raw
# requests go through a topic exchange, as magnum-api's do; the loops that publish straight to the
# queue are printed beside them (the baseline of the figures before 2026-12-03).
metric() { awk -v b="$1" -v u="$2" '$1 ~ "^"b"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == u) print $i }' "$out/micro.txt" | head -1; }
call=$(metric BenchmarkCallRoundTrip p50-µs) rawcall=$(metric BenchmarkRawAMQPRoundTrip p50-µs)
server=$(metric BenchmarkServerRoundTrip p50-µs)
cast=$(metric BenchmarkCastThroughput msgs/s) rawcast=$(metric BenchmarkRawAMQPThroughput msgs/s)
direct=$(metric BenchmarkRawAMQPRoundTripDefaultExchange p50-µs) directcast=$(metric BenchmarkRawAMQPThroughputDefaultExchange msgs/s)
rawcall_label="raw amqp091 $rawcall µs via a topic exchange, ${direct:-?} µs straight to the queue"
rawcast_label="raw amqp091 $rawcast/s via a topic exchange, ${directcast:-?}/s straight to the queue"
if [[ -n $call && -n $rawcall ]]; then
  printf 'RPC call round trip p50, our client and server (%s)\t%s µs = %s× raw\t\t≤ 1.3× raw\n' "$rawcall_label" "$call" \
    "$(awk -v a="$call" -v b="$rawcall" 'BEGIN { printf "%.2f", a / b }')" >>"$table"
fi
if [[ -n $server && -n $rawcall ]]; then
  printf 'RPC call round trip p50, the server alone: request pre-encoded as magnum-api sends it (%s)\t%s µs = %s× raw\t\t≤ 1.3× raw\n' \
    "$rawcall_label" "$server" "$(awk -v a="$server" -v b="$rawcall" 'BEGIN { printf "%.2f", a / b }')" >>"$table"
fi
if [[ -n $cast && -n $rawcast ]]; then
  printf 'casts handled per second, our client and server (%s)\t%s/s = %s× raw\t\t≥ 0.8× raw\n' "$rawcast_label" "$cast" \
    "$(awk -v a="$cast" -v b="$rawcast" 'BEGIN { printf "%.2f", a / b }')" >>"$table"
fi
servercast=$(metric BenchmarkServerCastThroughput msgs/s)
if [[ -n $servercast && -n $rawcast ]]; then
  printf 'casts handled per second, the server alone: casts pre-encoded as magnum-api sends them (%s)\t%s/s = %s× raw\t\t≥ 0.8× raw\n' \
    "$rawcast_label" "$servercast" "$(awk -v a="$servercast" -v b="$rawcast" 'BEGIN { printf "%.2f", a / b }')" >>"$table"
fi

scale_args=()
[[ -n ${BENCH_SCALE_CLUSTERS:-} ]] && scale_args+=(SCALE_CLUSTERS="$BENCH_SCALE_CLUSTERS")
[[ -n ${BENCH_SCALE_SOAK:-} ]] && scale_args+=(SCALE_SOAK="$BENCH_SCALE_SOAK")
[[ -n ${BENCH_SCALE_KEYS-800} ]] && scale_args+=(SCALE_KEYS="${BENCH_SCALE_KEYS-800}")
commands+=("make bench-scale ${scale_args[*]}")
# A run that fails still ends with the table (its rows so far, and a row naming the failure); the
# script exits non-zero after it.
failed=()
if ! MCB_BENCH_TABLE=$table make --no-print-directory bench-scale "${scale_args[@]}"; then
  failed+=(bench-scale)
  printf 'bench-scale\tFAILED (its output above says why; its figures may be incomplete)\t\t\n' >>"$table"
fi

if [[ ${BENCH_PEER:-1} == 0 ]]; then
  printf 'bench-peer\tleft out (BENCH_PEER=0)\t\t\n' >>"$table"
elif ! deploy/local/mgmt-status.sh >/dev/null 2>&1; then
  printf 'bench-peer\tleft out: the local stack is not up (make up)\t\t\n' >>"$table"
else
  commands+=("make bench-peer PEER_CLUSTERS=${BENCH_PEER_CLUSTERS:-5}")
  if ! MCB_BENCH_TABLE=$table make --no-print-directory bench-peer PEER_CLUSTERS="${BENCH_PEER_CLUSTERS:-5}"; then
    failed+=(bench-peer)
    printf 'bench-peer\tFAILED (its output above says why, e.g. a create or delete that did not finish; its figures are incomplete)\t\t\n' >>"$table"
  fi
fi

echo
echo "## make bench: $(date -u +%FT%TZ), $(git describe --always --dirty 2>/dev/null), $(nproc) cores"
for c in "${commands[@]}"; do echo "## command: $c"; done
echo "| figure | bridge | peer | ratio | goal |"
echo "|---|---|---|---|---|"
awk -F'\t' '{
  ratio = "–"
  b = $2; p = $3
  if (b ~ /^[0-9.]+ / && p ~ /^[0-9.]+ /) { split(b, x, " "); split(p, y, " "); if (x[1] > 0) ratio = sprintf("%.2f×", y[1] / x[1]) }
  printf "| %s | %s | %s | %s | %s |\n", $1, b, (p == "" ? "–" : p), ratio, $4
}' "$table"
if ((${#failed[@]})); then
  echo "## FAILED: ${failed[*]}"
  exit 1
fi
