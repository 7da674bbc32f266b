#!/usr/bin/env bash
# bench_node_loss.sh: how soon an elastic job trains again after a node vanishes without notice,
# through the real binaries, one command.
#
#   tests/perf/bench_node_loss.sh [--sizes "4 8"] [--losses 10] [--lease-ms 10000]
#                                 [--grace-ms MS] [--head-bin PATH] [--bin DIR] [--out FILE]
#
# For each size N it starts a head (lease --lease-ms, heartbeat 200 ms; suspect_grace_ms set to
# --grace-ms when given, else the head's default) and N agents of one slot each on this machine,
# and runs tests/perf/bench_elastic (every step: an allreduce of a 1 MiB model and a commit; a
# 5 ms pause) as an elastic job -np N --min-np 1 --max-np N. Then, --losses times: a random
# node's agent and its worker are SIGKILLed together (nobody reports an exit: the node just
# vanishes); latency = the kill -> the first step completed in the next round (N-1 workers).
# Once that step is seen a new agent takes the node's name and the job grows back to N before
# the next loss. Breakdown: detect (kill -> the head opens the round: the survivors' broken
# ring), round (open -> close: the wait for the vanished node's worker), rest (close -> the
# first step: re-joins answered, ring, state sync, the step). Prints median and worst (ms) per
# size and writes them to --out if given. --head-bin runs another hvhead (e.g. an older build)
# with the same agents and workers.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$SRC/build/bin
HEAD_BIN=""
SIZES="4 8"
LOSSES=10
LEASE_MS=10000
GRACE_MS=""
OUT=""
while [ $# -gt 0 ]; do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --losses) LOSSES=$2; shift 2 ;;
    --lease-ms) LEASE_MS=$2; shift 2 ;;
    --grace-ms) GRACE_MS=$2; shift 2 ;;
    --head-bin) HEAD_BIN=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--sizes \"4 8\"] [--losses N] [--lease-ms MS] [--grace-ms MS] [--head-bin PATH] [--bin DIR] [--out FILE]" >&2; exit 2 ;;
    esac
done
HEAD_BIN=${HEAD_BIN:-$BIN/hvhead}
[ -x "$HEAD_BIN" ] && [ -x "$BIN/hvagent" ] && [ -x "$BIN/bench_elastic" ] || { echo "build first: $HEAD_BIN, $BIN/hvagent, $BIN/bench_elastic" >&2; exit 2; }
. "$(dirname "$0")/bench_lib.sh"

RESULTS=$TMP/results.txt
: >"$RESULTS"
for N in $SIZES; do
    new_run
    bench_head 200 "$LEASE_MS" ${GRACE_MS:+"suspect_grace_ms: $GRACE_MS"} "elastic:" \
        "  rendezvous_timeout_s: 60" "  blacklist_cooldown_s: 1" "  blacklist_max_cooldown_s: 2" \
        "  blacklist_max_strikes: 0"
    # shellcheck disable=SC2046 # the names n1..nN
    join_agents $(seq -f "n%g" 1 "$N")
    bench_job "$N" 3600
    : >"$D/marks"
    for r in $(seq 1 "$LOSSES"); do
        g=$(max_gen)
        node="n$(( RANDOM % N + 1 ))"
        kill_node "$node" "$g"
        wait_for $(( LEASE_MS / 1000 + 60 )) gen_above "$g" || { echo "N=$N: no round after a node loss" >&2; exit 1; }
        start_agent "$node" # a new agent takes the name over; the job grows back onto it
        wait_for 60 full_size_above "$g" "$N" || { echo "N=$N: the job did not grow back" >&2; tail "$D/sub.err" >&2; exit 1; }
    done
    "$BIN/hvctl" --head "$HEAD" events --job 1 --json --limit 100000 >"$D/events.json"
    PYTHONPATH="$SRC/tests/perf" /usr/bin/python3 - "$N" "$D" "$RESULTS" <<'PY'
import sys
from loss_marks import events, first_steps, losses, mm, round_times
N, D, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
steps = first_steps(D)
ev = events(D)
opened, closed = round_times(ev, "round.open"), round_times(ev, "round.close")
lat, det, rnd, rest = [], [], [], []
for t, node, ng in losses(D, steps):
    lat.append(steps[ng] - t)
    if ng in opened:
        det.append(opened[ng] - t)
    if ng in opened and ng in closed:
        rnd.append(closed[ng] - opened[ng])
    if ng in closed:
        rest.append(steps[ng] - closed[ng])
row = "%3d  %3d  %s  %s  %s  %s" % (N, len(lat), mm(lat), mm(det), mm(rnd), mm(rest))
open(out, "a").write(row + "\n")
print(row, flush=True)
PY
    kill -INT "$SUB" 2>/dev/null || true
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $(pgrep -f "$D" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    PIDS=""
    sleep 0.5
done
{
    echo "node loss (agent + worker SIGKILLed) -> next completed step, ms (median, worst); lease $LEASE_MS ms, grace ${GRACE_MS:-default}; $(nproc) cores"
    echo "  N  runs  kill->step(med max)  detect(med max)   round(med max)   rest(med max)"
    cat "$RESULTS"
} | tee "${OUT:-/dev/null}"
