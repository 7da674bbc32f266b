#!/usr/bin/env bash
# bench_hier.sh: libhv's hierarchical (2D) allreduce against the flat ring, in one command.
#   tests/perf/bench_hier.sh [REPS=3]
# Starts a local hvhead and two hvagents (node-a, node-b, 2 slots each) on loopback, then runs
# `hvsubmit -np 4 bench_allreduce` with HV_HIERARCHICAL=1 and =0 alternately REPS times and prints
# the median time and busbw per size with the ratio flat/hierarchical (above 1: hierarchical is
# faster). Binaries from ${BUILD:-build}. Everything it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${1:-3}
B=${BUILD:-build}/bin
SIZES=${SIZES:-1M,16M,64M,256M}
[ -x "$B/bench_allreduce" ] || cmake --build "${BUILD:-build}" --target bench_allreduce hvhead hvagent hvsubmit >/dev/null
W=$(mktemp -d /tmp/hv-bench-hier.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
printf 'listen: 127.0.0.1:0\ndata_dir: %s/data\ntoken: bench\n' "$W" >"$W/head.yaml"
export HV_TOKEN_FILE="$W/data/client.token" # the CLIs' credential, written by the head
"$B/hvhead" start --config "$W/head.yaml" >"$W/head.out" 2>"$W/head.err" & PIDS+=($!)
for _ in $(seq 100); do grep -q 'listening on' "$W/head.out" && break; sleep 0.1; done
H=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$W/head.out")
for n in node-a node-b; do
    "$B/hvagent" join "$H" --token bench --name $n --slots 2 --work-dir "$W/$n" >"$W/$n.out" 2>"$W/$n.err" & PIDS+=($!)
    for _ in $(seq 100); do grep -q joined "$W/$n.out" && break; sleep 0.1; done
done
for rep in $(seq "$REPS"); do
    for hier in 1 0; do
        echo "repetition $rep/$REPS, HV_HIERARCHICAL=$hier ..." >&2
        "$B/hvsubmit" --head "$H" -q -np 4 -e HV_HIERARCHICAL=$hier "$B/bench_allreduce" \
            --sizes "$SIZES" --runs 5 2>/dev/null | sed -n "s/^\[0\]<stdout>:ROW /$hier /p"
    done
done >"$W/rows"
/usr/bin/python3 - "$W/rows" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    hier, kind, size, t, bw = line.split()
    d[(int(size), hier)].append((float(t), float(bw)))
print("size       flat ring                hierarchical             flat/hier")
for size in sorted({k[0] for k in d}):
    f = [statistics.median(x[i] for x in d[(size, "0")]) for i in (0, 1)]
    h = [statistics.median(x[i] for x in d[(size, "1")]) for i in (0, 1)]
    print(f"{size / 1048576:6.0f} MiB  {f[0]:11.1f} us {f[1]:6.3f} GB/s  {h[0]:11.1f} us {h[1]:6.3f} GB/s  {f[0] / h[0]:6.2f}")
PY
