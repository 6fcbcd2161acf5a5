#!/usr/bin/env bash
# Runs the benchmarks and prints their figures with the command that produced them.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmd=(go test -run '^$' -bench . -benchmem -benchtime "${BENCHTIME:-2s}" -count 1 ./internal/... ./test/...)
echo "# command: ${cmd[*]}"
echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(go version)"
"${cmd[@]}" 2>&1 | grep -E '^(Benchmark|ok|FAIL|---|#|goos|pkg|PASS)' || true
