#!/usr/bin/env bash
# bench_sync.sh: how fast an elastic state reaches the other ranks, in one command.
#
#   tests/perf/bench_sync.sh [--quick] [--bin DIR] [--ranks "2 4"] [--sizes 64M,512M]
#                            [--runs N] [--tensors T]
#
# For each rank count and transport (tcp: HV_SHM=0; shm: same-host neighbours through shared
# memory, the default) it runs bench_sync under its own forking launcher (rdzv_file) and prints,
# per state size: the median time of a plain ring broadcast of the bytes (hv_broadcast: the
# ring's bandwidth), of hv_state_sync (what a joiner waits for after a new round: the layout
# check, the broadcast of every buffer, the snapshot) and of a commit (the in-memory snapshot),
# with GB/s = bytes / time. --quick: 64M only, 2 ranks, 1 run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin="${HV_BIN_DIR:-$repo/build/bin}"
ranks="2 4"
sizes="64M,512M"
runs=3
tensors=16
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) sizes="64M"; ranks="2"; runs=1; shift ;;
    --bin) bin="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --tensors) tensors="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
    *) echo "bench_sync.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
b="$bin/bench_sync"
[ -x "$b" ] || { echo "missing $b (build the bench_sync target)" >&2; exit 2; }

printf '%-6s %-4s %-8s | %-22s | %-22s | %-22s\n' ranks link state "broadcast" "hv_state_sync" \
  "commit (snapshot)"
for n in $ranks; do
  for mode in tcp shm; do
    shm=1
    [ "$mode" = tcp ] && shm=0
    HV_SHM=$shm "$b" --launch "$n" --sizes "$sizes" --runs "$runs" --tensors "$tensors" |
      awk -v n="$n" -v mode="$mode" '
        $1 == "ROW" { t[$3, $2] = $4; g[$3, $2] = $5; if (!($3 in seen)) { seen[$3] = 1; order[++k] = $3 } }
        function cell(kind, b) { return sprintf("%9.1f ms %6.2f GB/s", t[b, kind] / 1000, g[b, kind]) }
        END {
          for (i = 1; i <= k; i++) {
            b = order[i]
            printf "%-6s %-4s %-8s | %s | %s | %s\n", n, mode, sprintf("%dMiB", b / 1048576),
              cell("bcast", b), cell("sync", b), cell("commit", b)
          }
        }'
  done
done
