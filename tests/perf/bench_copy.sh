#!/usr/bin/env bash
# bench_copy.sh: what keeping copies of the training state at the head costs, side by side.
#
#   tests/perf/bench_copy.sh [--peer] [--factor F] [--model BYTES] [--ranks N] [--seconds S] [--mark-ms M]
#                            [--pairs P] [--bin DIR] [--logs DIR [--trace]]
#
# Starts a head and N one-slot agents on this machine and runs tests/perf/bench_elastic (every
# step: an allreduce of the model over TCP and a commit of it as the elastic state) as an elastic
# job of N workers for S seconds, P times with copies off (HV_STATE_COPY=0) and P times with the
# default copies, alternating off/on so that both see the same machine. Two throughputs a run,
# from rank 0's lines: "whole" = steps / (its first completed step -> its last), which holds the
# first copy (taken at the first commit, so that a job is protected early); and "steady" = the
# steps from the first step M ms after the first one (BENCH mark) to the last, which leaves the
# first copy out and holds the copies at the default interval (the run says how many were sent:
# the window should hold several). Prints each run, the medians of both, the copies' cost in % of
# step throughput for both, the head's CPU time in each run (receiving, hashing and writing the
# copies), the CPU time per step of the ranks and the head together (the copies' cost in CPU,
# which a busy shared machine disturbs much less than the throughput), the bytes of copies the
# head took and the peers kept in each run (/metrics hv_state_copy_bytes_total), and the load
# average before and after. The agents keep no copies (--copy-memory 0), so "on" sends every copy
# to the head; with --peer the agents keep them (the default --copy-memory) and "peer" runs send
# each copy to another node's agent, the head keeping only the index (issue 28 §3); the agents'
# CPU time in each run is printed too (the keepers' receiving, copying and hashing, beside their
# heartbeats: compare with the runs without copies). --factor F runs the copies at
# HV_STATE_COPY_FACTOR=F instead of libhv's default (the interval is F times a copy's cost).
# Defaults: a 64 MiB state,
# 2 ranks, 45 s a run, a mark at 10 s, 3 pairs. --logs DIR keeps each run's output there;
# --trace adds rank 0's every step time (BENCH tick) and each copy's times (HV-COPY-SENT) to it.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${HV_BIN_DIR:-$SRC/build/bin}
MODEL=$((64 << 20))
RANKS=2
SECONDS_RUN=45
MARK_MS=10000
PAIRS=3
LOGS=""
TRACE=0
PEER=0
FACTOR=""
while [ $# -gt 0 ]; do
    case $1 in
    --model) MODEL=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --mark-ms) MARK_MS=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --trace) TRACE=1; shift ;;
    --peer) PEER=1; shift ;;
    --factor) FACTOR=$2; shift 2 ;;
    *) echo "usage: $0 [--peer] [--factor F] [--model BYTES] [--ranks N] [--seconds S] [--mark-ms M] [--pairs P] [--bin DIR] [--logs DIR [--trace]]" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/hvhead" ] && [ -x "$BIN/bench_elastic" ] || { echo "build first: $BIN/hvhead, $BIN/bench_elastic" >&2; exit 2; }
[ $TRACE = 0 ] || [ -n "$LOGS" ] || { echo "--trace needs --logs DIR" >&2; exit 2; }
[ -z "$LOGS" ] || mkdir -p "$LOGS"
LEVEL=info
[ $TRACE = 0 ] || LEVEL=debug
BENCH_TMP_PREFIX=hvbenchcopy
. "$(dirname "$0")/bench_lib.sh"
MPORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$TMP/head.yaml" <<YAML
cluster_name: bench
listen: 127.0.0.1:0
data_dir: $TMP/data
token: bench-token
heartbeat_ms: 200
lease_ms: 5000
log_level: notice
metrics:
  listen: 127.0.0.1:$MPORT
YAML
export HV_TOKEN_FILE="$TMP/data/client.token"
"$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/head.out" 2>"$TMP/head.err" &
HEAD_PID=$!
PIDS="$PIDS $HEAD_PID"
# The head's CPU time so far, in ms (user + system, from /proc).
# The head's counter of copy bytes kept by $1 (head or peer).
copy_bytes() { curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" | sed -n "s/^hv_state_copy_bytes_total{kept_by=\"$1\"} //p"; }
head_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15) * 1000 / hz }' "/proc/$HEAD_PID/stat"; }
# The agents' CPU time so far, in ms (the keepers, with --peer).
agents_cpu_ms() {
    # shellcheck disable=SC2086
    awk -v hz="$(getconf CLK_TCK)" '{ s += $14 + $15 } END { printf "%d", s * 1000 / hz }' $AGENT_STATS
}
wait_for 10 grep -q 'listening on' "$TMP/head.out" || { echo "head did not start" >&2; exit 1; }
HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$TMP/head.out")
KEEP="--copy-memory 0"
[ $PEER = 0 ] || KEEP=""
for i in $(seq 1 "$RANKS"); do
    # shellcheck disable=SC2086
    "$BIN/hvagent" join "$HEAD" --token bench-token --name "n$i" --slots 1 $KEEP \
        --work-dir "$TMP/agent-n$i" >"$TMP/agent-n$i.out" 2>"$TMP/agent-n$i.err" &
    PIDS="$PIDS $!"
    AGENT_STATS="${AGENT_STATS:-} /proc/$!/stat"
done
for i in $(seq 1 "$RANKS"); do
    wait_for 20 grep -q joined "$TMP/agent-n$i.out" || { echo "agent n$i did not join" >&2; exit 1; }
done
ON=on
[ $PEER = 0 ] || ON=peer
ENVF=""
[ -z "$FACTOR" ] || ENVF="--env HV_STATE_COPY_FACTOR=$FACTOR"
echo "bench_copy: copies off vs $ON${FACTOR:+ (HV_STATE_COPY_FACTOR=$FACTOR)}, state $MODEL bytes, $RANKS ranks over TCP (HV_SHM=0), $SECONDS_RUN s a run (steady window from $MARK_MS ms), machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
run=0
for p in $(seq 1 "$PAIRS"); do
    for mode in off $ON; do
        run=$((run + 1))
        tm="" sm="" t1="" s1=""
        copy=1; [ $mode = off ] && copy=0
        hc0=$(head_cpu_ms) ac0=$(agents_cpu_ms) hb0=$(copy_bytes head) pb0=$(copy_bytes peer)
        envf=""
        [ "$mode" = off ] || envf=$ENVF
        # shellcheck disable=SC2086 # $envf: none or one --env pair
        "$BIN/hvsubmit" --head "$HEAD" -np "$RANKS" --min-np "$RANKS" --max-np "$RANKS" \
            --env HV_SHM=0 --env HV_STATE_COPY=$copy --env HV_LOG_LEVEL=$LEVEL --env HV_BENCH_TRACE=$TRACE $envf \
            "$BIN/bench_elastic" --model "$MODEL" --seconds "$SECONDS_RUN" --mark-ms "$MARK_MS" --step-ms 0 \
            >"$TMP/run$run.out" 2>"$TMP/run$run.err" || { echo "run $run failed" >&2; tail "$TMP/run$run.err" >&2; exit 1; }
        hcpu=$(($(head_cpu_ms) - hc0)) acpu=$(($(agents_cpu_ms) - ac0))
        hb=$(($(copy_bytes head) - hb0)) pb=$(($(copy_bytes peer) - pb0))
        f="$TMP/run$run.out $TMP/run$run.err"
        [ -z "$LOGS" ] || cp "$TMP/run$run.out" "$TMP/run$run.err" "$LOGS/"
        # shellcheck disable=SC2086
        t0=$(sed -n 's/^\[0\]<stdout>:BENCH step \([0-9]*\) .*/\1/p' $f | head -n 1)
        # shellcheck disable=SC2086
        read -r tm sm < <(sed -n 's/^\[0\]<stdout>:BENCH mark \([0-9]*\) step=\([0-9]*\).*/\1 \2/p' $f | head -n 1) || true
        # shellcheck disable=SC2086
        read -r t1 s1 < <(sed -n 's/^\[0\]<stdout>:BENCH done \([0-9]*\) .* steps=\([0-9]*\).*/\1 \2/p' $f | head -n 1) || true
        [ -n "$t0" ] && [ -n "${tm:-}" ] && [ -n "${t1:-}" ] || { echo "run $run: rank 0's BENCH lines are missing (mark after the end?)" >&2; tail -n 5 "$TMP/run$run.out" "$TMP/run$run.err" >&2; exit 1; }
        # shellcheck disable=SC2086
        sent=$(sed -n 's/.*HV-COPY-STATS: state copies: \([0-9]*\) sent.*skipped[^;]*; last cost \([0-9]*\) ms (its send took \([0-9]*\) ms).*/\1 copies, last cost \2 ms CPU, sent in \3 ms/p' $f | head -n 1)
        # shellcheck disable=SC2086
        rcpu=$(sed -n 's/^\[[0-9]*\]<stdout>:BENCH done .* cpu_ms=\([0-9]*\).*/\1/p' $f | awk '{ s += $1 } END { print s + 0 }')
        cps=$(awk -v r="$rcpu" -v h="$hcpu" -v s="$s1" 'BEGIN { printf "%.1f", (r + h) / s }')
        whole=$(awk -v s="$s1" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (s - 1) * 1000 / (b - a) }')
        steady=$(awk -v s="$s1" -v m="$sm" -v a="$tm" -v b="$t1" 'BEGIN { printf "%.3f", (s - m) * 1000 / (b - a) }')
        echo "run $run copies=$mode steps/s whole=$whole steady=$steady ${sent:+($sent)} head CPU ${hcpu} ms, agents CPU ${acpu} ms, copy bytes at the head $hb, at peers $pb, CPU/step ${cps} ms (ranks ${rcpu} + head), load $(cut -d' ' -f1 /proc/loadavg)"
        echo "$mode $whole $steady $cps $hb $pb" >>"$TMP/rates"
    done
done
awk -v on=$ON '{ w[$1] = w[$1] " " $2; s[$1] = s[$1] " " $3; c[$1] = c[$1] " " $4; hb[$1] += $5; pb[$1] += $6; n[$1]++
       if (!($1 in lo) || $3 + 0 < lo[$1]) lo[$1] = $3 + 0 }
     function med(v,   a, n, i, j, t) { n = split(v, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
                                      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END { off = med(w["off"]); o = med(w[on]);
           printf "median steps/s, whole run (holds the first copy): copies off %.3f, %s %.3f: copies cost %.1f%%\n", off, on, o, (off - o) * 100 / off
           off = med(s["off"]); o = med(s[on]);
           printf "median steps/s, steady window (first copy left out): copies off %.3f, %s %.3f: copies cost %.1f%% (worst run: off %.3f, %s %.3f)\n", off, on, o, (off - o) * 100 / off, lo["off"], on, lo[on]
           off = med(c["off"]); o = med(c[on]);
           printf "median CPU time per step (ranks and head, whole run): copies off %.1f ms, %s %.1f ms: copies cost %.1f%% more CPU\n", off, on, o, (o - off) * 100 / off
           printf "copy bytes per %s run: at the head %.0f, kept by peers %.0f\n", on, hb[on] / n[on], pb[on] / n[on] }' "$TMP/rates"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
