#!/usr/bin/env bash
# bench_silent_loss.sh: how soon an elastic job trains again after a node's link goes down (no
# FIN, no RST: a cloud VM taken without notice, a switch that fails), through the real binaries,
# one command. Needs root (ip netns).
#
#   tests/perf/bench_silent_loss.sh [--sizes "3 8"] [--trials 10] [--env K=V]... [--bin DIR]
#                                   [--out FILE]
#
# For each size N: the head and N one-slot agents each in their own network namespace on a
# bridge (tests/netns_lib.sh), the head's defaults for heartbeat (1 s), lease (10 s) and grace
# (500 ms), and tests/perf/bench_elastic (every step an allreduce of a 1 MiB model and a commit,
# a 5 ms pause) as an elastic job -np N --min-np 1 --max-np N. Then --trials times: the link of
# a random node is set down inside its namespace; latency = link down -> the first step
# completed in the next round (N-1 workers). The link comes back once that step is seen (within
# the lease: the node keeps its name, its stale worker is stopped) and the job grows back to N
# before the next trial. Breakdown: detect (link down -> node.suspect), round (-> round.close),
# rest (-> the first step: answers, ring, state sync, the step). Prints median and worst (ms)
# per size, the evidence each suspicion came from, and the machine's load average before and
# after; --out FILE keeps the table. --env K=V goes to the workers (e.g. HV_LIVENESS_MS=0 for
# the figures without the detector).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$SRC/build/bin
SIZES="3 8"
TRIALS=10
OUT=""
ENVS=()
while [ $# -gt 0 ]; do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --trials) TRIALS=$2; shift 2 ;;
    --env) ENVS+=(--env "$2"); shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--sizes \"3 8\"] [--trials N] [--env K=V]... [--bin DIR] [--out FILE]" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/hvhead" ] && [ -x "$BIN/hvagent" ] && [ -x "$BIN/bench_elastic" ] || { echo "build first: $BIN" >&2; exit 2; }
BENCH_TMP_PREFIX=hvsilent
. "$(dirname "$0")/bench_lib.sh"
. "$SRC/tests/netns_lib.sh"
NMAX=0
for N in $SIZES; do [ "$N" -gt "$NMAX" ] && NMAX=$N; done
netns_bench hvb$$ 10.204.0 "$NMAX"
SUB_OPTS=("${ENVS[@]}")
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
RESULTS=$TMP/results.txt
: >"$RESULTS"
for N in $SIZES; do
    new_run
    netns_cluster "$D" $P 10.204.0 "$N" "elastic:" "  rendezvous_timeout_s: 60" \
        "  blacklist_cooldown_s: 1" "  blacklist_max_cooldown_s: 2" "  blacklist_max_strikes: 0" || exit 1
    bench_job "$N" 3600
    : >"$D/marks"
    for r in $(seq 1 "$TRIALS"); do
        sleep 2 # heartbeats flow on every link of the newest ring
        g=$(max_gen)
        i=$(( RANDOM % N + 1 ))
        t=$(now_ms)
        netns_link $P "$i" down
        echo "down $t $g n$i" >>"$D/marks"
        wait_for 60 gen_above "$g" || { echo "N=$N: no round after n$i's link went down" >&2; netns_link $P "$i" up; exit 1; }
        netns_link $P "$i" up # within the lease: the node keeps its name; its stale worker goes
        wait_for 60 full_size_above "$g" "$N" ||
            { echo "N=$N: the job did not grow back" >&2; tail "$D/sub.err" >&2; exit 1; }
    done
    ip netns exec ${P}h "$BIN/hvctl" --head $H events --json --limit 100000 >"$D/events.json"
    PYTHONPATH="$SRC/tests/perf" /usr/bin/python3 - "$N" "$D" "$RESULTS" <<'PY'
import sys
from loss_marks import events, first_steps, losses, mm, round_times
N, D, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
steps = first_steps(D)
ev = events(D)
closed = round_times(ev, "round.close")
suspects = [e for e in ev if e["kind"] == "node.suspect"]
lat, det, rnd, rest, evid = [], [], [], [], {}
for t, node, ng in losses(D, steps):
    lat.append(steps[ng] - t)
    s = [e for e in suspects if e["time_ms"] >= t and e["node"] == node]
    if s:
        det.append(s[0]["time_ms"] - t)
        k = s[0]["data"].get("evidence", "?")
        evid[k] = evid.get(k, 0) + 1
        if ng in closed:
            rnd.append(closed[ng] - s[0]["time_ms"])
    if ng in closed:
        rest.append(steps[ng] - closed[ng])
ev_s = ",".join("%s:%d" % kv for kv in sorted(evid.items())) or "-"
row = "%3d  %3d  %s  %s  %s  %s  %s" % (N, len(lat), mm(lat), mm(det), mm(rnd), mm(rest), ev_s)
open(out, "a").write(row + "\n")
print(row, flush=True)
PY
    kill -INT "$SUB" 2>/dev/null || true
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    for i in h $(seq 1 "$NMAX"); do netns_pids $P "$i" | xargs -r kill -KILL 2>/dev/null || true; done
    PIDS=""
    sleep 0.5
done
{
    echo "link down -> next completed step, ms (median, worst); heartbeat 1 s, lease 10 s, grace 500 ms (defaults); ${ENVS[*]:-no --env}; $(nproc) cores; load average before ${LOAD0}, after $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "  N  runs  down->step(med max)  detect(med max)   round(med max)   rest(med max)  evidence"
    cat "$RESULTS"
} | tee "${OUT:-/dev/null}"
