#!/usr/bin/env bash
# bench_lone_loss.sh: how soon a one-worker elastic job trains again after its node is killed
# without notice (agent and worker SIGKILLed together), through the real binaries, one command.
#
#   tests/perf/bench_lone_loss.sh [--trials 10] [--lease-ms 10000] [--head-bin PATH] [--bin DIR]
#                                 [--out FILE]
#
# A head (heartbeat 1 s, lease --lease-ms, the default grace of 500 ms) and two one-slot agents
# on this machine; tests/perf/bench_elastic (every step an allreduce of a 1 MiB model and a
# commit, a 5 ms pause) as an elastic job -np 1, whose state the head keeps copies of. Then
# --trials times: once the head holds a copy from the worker now running, the node running it
# is SIGKILLed (agent and worker); latency = the kill -> the first step of the next generation
# (the job resumed from the copy on the other node). A new agent then takes the killed node's
# name (the next trial kills the other one). Breakdown: resume (kill -> job.resume), rest
# (-> the first step), split into start+join (-> the resumed round closes: placement, spawn,
# the process's start, its join) and fetch+step (-> the step: the copy fetched and loaded, the
# sync, the step).
# Prints median and worst (ms) and the machine's load average; --head-bin runs another hvhead
# (e.g. an older build) with the same agents and workers.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$SRC/build/bin
HEAD_BIN=""
TRIALS=10
LEASE_MS=10000
OUT=""
while [ $# -gt 0 ]; do
    case $1 in
    --trials) TRIALS=$2; shift 2 ;;
    --lease-ms) LEASE_MS=$2; shift 2 ;;
    --head-bin) HEAD_BIN=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--trials N] [--lease-ms MS] [--head-bin PATH] [--bin DIR] [--out FILE]" >&2; exit 2 ;;
    esac
done
HEAD_BIN=${HEAD_BIN:-$BIN/hvhead}
[ -x "$HEAD_BIN" ] && [ -x "$BIN/hvagent" ] && [ -x "$BIN/bench_elastic" ] || { echo "build first: $HEAD_BIN, $BIN/hvagent, $BIN/bench_elastic" >&2; exit 2; }
BENCH_TMP_PREFIX=hvlone
. "$(dirname "$0")/bench_lib.sh"
D=$TMP
copy_gen() { # the generation of the head's newest copy of job 1 (0: none)
    "$BIN/hvctl" --head "$HEAD" job 1 --json 2>/dev/null |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("copy", {}).get("generation", 0))'
}
copy_of() { [ "$(copy_gen)" -ge "$1" ]; }
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
bench_head 1000 "$LEASE_MS"
join_agents n1 n2
bench_job 1 3600
: >"$D/marks"
for r in $(seq 1 "$TRIALS"); do
    g=$(max_gen)
    wait_for 60 copy_of "$g" || { echo "no copy of generation $g at the head" >&2; exit 1; }
    node=""
    for n in n1 n2; do [ -n "$(node_workers $n)" ] && node=$n; done
    [ -n "$node" ] || { echo "no node runs the worker" >&2; exit 1; }
    kill_node "$node" "$g"
    wait_for $((LEASE_MS / 1000 + 60)) gen_above "$g" || { echo "no step after the kill of $node" >&2; tail "$D/sub.err" >&2; exit 1; }
    start_agent "$node" # a new agent takes the name over, for the next trial
    wait_for 20 grep -q "joined" "$D/agent-$node.out" || true
    sleep 1
done
"$BIN/hvctl" --head "$HEAD" events --job 1 --json --limit 100000 >"$D/events.json"
{
    echo "lone member's node SIGKILLed -> next completed step, ms; heartbeat 1 s, lease $LEASE_MS ms, grace 500 ms; head $HEAD_BIN; $(nproc) cores; load average before $LOAD0, after $(cut -d' ' -f1-3 /proc/loadavg)"
    PYTHONPATH="$SRC/tests/perf" /usr/bin/python3 - "$D" <<'PY'
import sys
from loss_marks import events, first_steps, losses, mm, round_times
D = sys.argv[1]
steps = first_steps(D)
ev = events(D)
resumes = [e for e in ev if e["kind"] == "job.resume"]
closed = round_times(ev, "round.close")
lat, res, rest, join, load = [], [], [], [], []
for t, node, ng in losses(D, steps):
    lat.append(steps[ng] - t)
    r = [e["time_ms"] for e in resumes if e["time_ms"] >= t]
    if r:
        res.append(r[0] - t)
        rest.append(steps[ng] - r[0])
        if ng in closed:
            join.append(closed[ng] - r[0])
            load.append(steps[ng] - closed[ng])
print("trials  kill->step(med max)  resume(med max)   rest(med max)   (start+join  fetch+step)")
print("%5d   %s        %s     %s    (%s  %s)" % (len(lat), mm(lat), mm(res), mm(rest), mm(join),
                                              mm(load)))
print("all (ms): " + " ".join(str(x) for x in lat))
PY
} | tee "${OUT:-/dev/null}"
