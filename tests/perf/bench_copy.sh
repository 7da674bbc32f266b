#!/usr/bin/env bash
# bench_copy.sh: what keeping copies of the training state at the head costs, side by side.
#
#   tests/perf/bench_copy.sh [--model BYTES] [--ranks N] [--steps S] [--pairs P] [--bin DIR]
#
# Starts a head and N one-slot agents on this machine and runs tests/perf/bench_elastic (every
# step: an allreduce of the model over TCP and a commit of it as the elastic state) as an elastic
# job of N workers, P times with copies off (HV_STATE_COPY=0) and P times with the default
# copies, alternating off/on so that both see the same machine. Throughput = steps / (rank 0's
# first completed step -> its last). Prints each run, the medians, the cost in % of step
# throughput, and the copies rank 0 sent (from its HV-COPY-STATS line). Defaults: a 64 MiB
# state, 2 ranks, 60 steps, 2 pairs.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${HV_BIN_DIR:-$SRC/build/bin}
MODEL=$((64 << 20))
RANKS=2
STEPS=60
PAIRS=2
while [ $# -gt 0 ]; do
    case $1 in
    --model) MODEL=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    *) echo "usage: $0 [--model BYTES] [--ranks N] [--steps S] [--pairs P] [--bin DIR]" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/hvhead" ] && [ -x "$BIN/bench_elastic" ] || { echo "build first: $BIN/hvhead, $BIN/bench_elastic" >&2; exit 2; }
BENCH_TMP_PREFIX=hvbenchcopy
. "$(dirname "$0")/bench_lib.sh"
cat >"$TMP/head.yaml" <<YAML
cluster_name: bench
listen: 127.0.0.1:0
data_dir: $TMP/data
token: bench-token
heartbeat_ms: 200
lease_ms: 5000
log_level: notice
YAML
export HV_TOKEN_FILE="$TMP/data/client.token"
"$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/head.out" 2>"$TMP/head.err" &
PIDS="$PIDS $!"
wait_for 10 grep -q 'listening on' "$TMP/head.out" || { echo "head did not start" >&2; exit 1; }
HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$TMP/head.out")
for i in $(seq 1 "$RANKS"); do
    "$BIN/hvagent" join "$HEAD" --token bench-token --name "n$i" --slots 1 \
        --work-dir "$TMP/agent-n$i" >"$TMP/agent-n$i.out" 2>"$TMP/agent-n$i.err" &
    PIDS="$PIDS $!"
done
for i in $(seq 1 "$RANKS"); do
    wait_for 20 grep -q joined "$TMP/agent-n$i.out" || { echo "agent n$i did not join" >&2; exit 1; }
done
echo "bench_copy: state $MODEL bytes, $RANKS ranks over TCP (HV_SHM=0), $STEPS steps a run, machine: $(nproc) cores"
run=0
for p in $(seq 1 "$PAIRS"); do
    for mode in off on; do
        run=$((run + 1))
        copy=1; [ $mode = off ] && copy=0
        "$BIN/hvsubmit" --head "$HEAD" -np "$RANKS" --min-np "$RANKS" --max-np "$RANKS" \
            --env HV_SHM=0 --env HV_STATE_COPY=$copy --env HV_LOG_LEVEL=info \
            "$BIN/bench_elastic" --model "$MODEL" --steps "$STEPS" --step-ms 0 \
            >"$TMP/run$run.out" 2>"$TMP/run$run.err" || { echo "run $run failed" >&2; tail "$TMP/run$run.err" >&2; exit 1; }
        t0=$(sed -n 's/^\[0\]<stdout>:BENCH step \([0-9]*\) .*/\1/p' "$TMP/run$run.out" "$TMP/run$run.err" | head -n 1)
        t1=$(sed -n 's/^\[0\]<stdout>:BENCH done \([0-9]*\) .*/\1/p' "$TMP/run$run.out" "$TMP/run$run.err" | head -n 1)
        sent=$(sed -n 's/.*HV-COPY-STATS: state copies: \([0-9]*\) sent.*skipped[^;]*; last cost \([0-9]*\) ms.*/\1 copies, last cost \2 ms/p' "$TMP/run$run.out" "$TMP/run$run.err" | head -n 1)
        rate=$(awk -v s="$STEPS" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (s - 1) * 1000 / (b - a) }')
        echo "run $run copies=$mode steps/s=$rate ${sent:+($sent)}"
        echo "$mode $rate" >>"$TMP/rates"
    done
done
awk '{ v[$1] = v[$1] " " $2 }
     function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END { off = med(v["off"]); on = med(v["on"]);
           printf "median steps/s: copies off %.3f, on %.3f: copies cost %.1f%% of step throughput\n", off, on, (off - on) * 100 / off }' "$TMP/rates"
