#!/usr/bin/env bash
# test-times.sh TIMES CPU LOG...: the time table `make test` ends with. TIMES has one line per stage
# (name, start and end in seconds from the run's start, exit status); CPU has the machine's busy
# percent every few seconds (seconds from the start, percent); the LOGs are go test -v outputs,
# whose top-level `--- PASS: TestX (12.34s)` lines give the slowest tests (the package is the next
# `ok`/`FAIL` line's).
set -uo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
times=$1 cpu=$2
shift 2
echo "== TIME TABLE: stages (seconds from the start of make test)"
printf '%-44s %7s %7s %7s %5s\n' stage start end took exit
sort -t $'\t' -k2,2n "$times" | awk -F'\t' '{printf "%-44s %7d %7d %7d %5d\n", $1, $2, $3, $3 - $2, $4; if ($3 > last) last = $3}
  END {printf "%-44s %7s %7d\n", "total", "", last}'
echo "== TIME TABLE: CPU busy, percent of both cores, per 5 minutes"
awk -F'\t' '{b = int($1 / 300); sum[b] += $2; n[b]++; if (b > last) last = b}
  END {for (i = 0; i <= last; i++) if (n[i]) printf "%3d-%3d min %3d%%\n", i * 5, i * 5 + 5, sum[i] / n[i]}' "$cpu"
echo "== TIME TABLE: the 10 slowest tests"
printf '%-9s %-6s %-60s %s\n' seconds result test package
for f in "$@"; do [[ -f $f ]] && cat "$f"; done | awk '
  /^--- (PASS|FAIL|SKIP): / {
    secs = $4; gsub(/[()s]/, "", secs)
    n++; name[n] = $3; res[n] = $2; t[n] = secs; pending[n] = 1
    next
  }
  /^(ok|FAIL)[ \t]+[^ \t]+[ \t]/ {
    for (i in pending) pkg[i] = $2
    delete pending
  }
  END { for (i = 1; i <= n; i++) printf "%s\t%s\t%s\t%s\n", t[i], res[i], name[i], (i in pkg ? pkg[i] : "-") }
' | sort -t $'\t' -k1,1gr | head -10 | awk -F'\t' '{sub(/:$/, "", $2); printf "%9.1f %-6s %-60s %s\n", $1, $2, $3, $4}'
