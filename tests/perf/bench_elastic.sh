#!/usr/bin/env bash
# bench_elastic.sh: reset latency of elastic jobs through the real binaries, one command.
#
#   tests/perf/bench_elastic.sh [--sizes "2 4 8 16"] [--resets 10] [--drains 3] [--model BYTES]
#                               [--step-ms MS] [--bin DIR] [--out FILE] [--env K=V ...]
#                               [--python] [--keep DIR]
#
# For each size N it starts a head and N agents of one slot each on this machine, and runs
# tests/perf/bench_elastic (every step: an allreduce of a model-sized buffer and a commit) as
# an elastic job -np N --min-np 1 --max-np N. Then:
#   failure  x --resets: SIGKILL a random worker; latency = kill -> first step completed in the
#            new round (N-1 workers). The node is barred for a 1 s cooldown (doubling to at
#            most 2 s), after which the job grows back onto it:
#   join     each of those regrowths: latency = the round opened by the newcomer -> its first
#            completed step (the members reach their next check, re-form the ring, sync);
#   drain    x --drains: hvctl drain of a random node; latency = the drain -> first step of the
#            round without it; then undrain (the job grows back).
# The head schedules first come, first served (fleet.policy: fcfs): the fleet policy grows a job
# only when the throughput a worker adds pays for its reset, and on a loaded machine a regrowth
# that adds nothing measurable was refused, so the job never grew back and the run stopped
# ("did not grow back"); what is measured, the reset after a kill, is the same either way.
# Breakdown of a failure: detection (kill -> the head opens the round), round (open -> close:
# the survivors re-joined), ring + sync (close -> the reset callback, after the new ring formed
# and the state went out from rank 0), first step (-> the first completed allreduce). Steps lost
# = steps rolled back by the restore (commit is every step, so at most the one in flight).
# Prints a table (median and max over the resets, ms) and writes it to --out if given.
# --python: the job is tests/perf/bench_elastic_python.py instead (the same steps and lines,
# written with hv.torch.elastic; hvsubmit -- /usr/bin/python3, which needs python3-torch and
# the build's build/python).
# --keep DIR: copies each size's events (hvctl events --json), kill marks, job output and head
# log to DIR/runK/ (the scratch directory is removed at exit), for a breakdown of detection.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$SRC/build/bin
SIZES="2 4 8 16"
RESETS=10
DRAINS=3
MODEL=$((1 << 20))
STEP_MS=5
OUT=""
ENVS=""
PYTHON=0
KEEP=""
while [ $# -gt 0 ]; do
    case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --resets) RESETS=$2; shift 2 ;;
    --drains) DRAINS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --step-ms) STEP_MS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --env) ENVS="$ENVS --env $2"; shift 2 ;;
    --python) PYTHON=1; shift ;;
    --keep) KEEP=$2; shift 2 ;;
    *) echo "usage: $0 [--sizes \"2 4 8 16\"] [--resets N] [--drains N] [--model BYTES] [--step-ms MS] [--bin DIR] [--out FILE] [--env K=V] [--python] [--keep DIR]" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/hvhead" ] && [ -x "$BIN/bench_elastic" ] || { echo "build first: $BIN/hvhead, $BIN/bench_elastic" >&2; exit 2; }
WORKER=("$BIN/bench_elastic")
if [ "$PYTHON" = 1 ]; then
    [ -f "$BIN/../python/hv/__init__.py" ] || { echo "build first: $BIN/../python/hv" >&2; exit 2; }
    /usr/bin/python3 -c "import torch" 2>/dev/null || { echo "SKIP: /usr/bin/python3 cannot import torch (install python3-torch)" >&2; exit 77; }
    WORKER=(-- /usr/bin/python3 "$SRC/tests/perf/bench_elastic_python.py")
fi
. "$(dirname "$0")/bench_lib.sh"
# "PID NODE" for every worker of the job (one pass over /proc).
worker_table() {
    # find says 1 when a process vanished while it looked; that is fine here.
    { find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$TMP/run$RUN/agent-*/jobs/*" \
        -printf '%h %l\n' 2>/dev/null || true; } |
        sed -E "s|^/proc/([0-9]+) $TMP/run$RUN/agent-([^/]+)/.*|\1 \2|"
}

RESULTS=$TMP/results.txt
: >"$RESULTS"
RUN=0
for N in $SIZES; do
    RUN=$((RUN + 1))
    D=$TMP/run$RUN
    mkdir -p "$D"
    cat >"$D/head.yaml" <<EOF
cluster_name: bench
listen: 127.0.0.1:0
data_dir: $D/data
token: bench-token
heartbeat_ms: 200
lease_ms: 3000
kill_grace_ms: 1000
log_level: notice
elastic:
  rendezvous_timeout_s: 30
  blacklist_cooldown_s: 1
  blacklist_max_cooldown_s: 2
  blacklist_max_strikes: 0
fleet:
  policy: fcfs
EOF
    export HV_TOKEN_FILE="$D/data/client.token" # the CLIs' credential, written by the head
    "$BIN/hvhead" start --config "$D/head.yaml" >"$D/head.out" 2>"$D/head.err" &
    PIDS="$PIDS $!"
    wait_for 10 grep -q 'listening on' "$D/head.out" || { echo "head did not start" >&2; exit 1; }
    HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$D/head.out")
    for i in $(seq 1 "$N"); do
        "$BIN/hvagent" join "$HEAD" --token bench-token --name "n$i" --slots 1 \
            --work-dir "$D/agent-n$i" >"$D/agent-n$i.out" 2>"$D/agent-n$i.err" &
        PIDS="$PIDS $!"
    done
    for i in $(seq 1 "$N"); do
        wait_for 20 grep -q joined "$D/agent-n$i.out" || { echo "agent n$i did not join" >&2; exit 1; }
    done
    # shellcheck disable=SC2086
    "$BIN/hvsubmit" --head "$HEAD" -np "$N" --min-np 1 --max-np "$N" --max-resets 100000 $ENVS \
        "${WORKER[@]}" --model "$MODEL" --seconds 3600 --step-ms "$STEP_MS" >"$D/sub.out" 2>"$D/sub.err" &
    SUB=$!
    PIDS="$PIDS $SUB"
    wait_for 60 full_size_above 0 "$N" || { echo "N=$N: the job did not start" >&2; tail "$D/sub.err" >&2; exit 1; }
    : >"$D/marks"
    for r in $(seq 1 "$RESETS"); do
        g=$(max_gen)
        # a random worker
        worker_table >"$D/workers"
        pick=$(( RANDOM % $(wc -l <"$D/workers") + 1 ))
        victim=$(sed -n "${pick}p" "$D/workers" | cut -d' ' -f1)
        victim_node=$(sed -n "${pick}p" "$D/workers" | cut -d' ' -f2)
        t=$(now_ms)
        kill -KILL "$victim"
        echo "kill $t $g $victim_node" >>"$D/marks"
        wait_for 60 gen_above "$g" || { echo "N=$N: no round after a kill" >&2; exit 1; }
        # the spare node (or the barred one after its 1 s cooldown) brings the job back to N
        wait_for 60 full_size_above "$g" "$N" || { echo "N=$N: the job did not grow back" >&2; exit 1; }
    done
    for r in $(seq 1 "$DRAINS"); do
        g=$(max_gen)
        worker_table >"$D/workers"
        pick=$(( RANDOM % $(wc -l <"$D/workers") + 1 ))
        victim_node=$(sed -n "${pick}p" "$D/workers" | cut -d' ' -f2)
        t=$(now_ms)
        "$BIN/hvctl" --head "$HEAD" drain "$victim_node" >/dev/null
        echo "drain $t $g $victim_node" >>"$D/marks"
        wait_for 60 gen_above "$g" || { echo "N=$N: no round after a drain" >&2; exit 1; }
        "$BIN/hvctl" --head "$HEAD" undrain "$victim_node" >/dev/null
        wait_for 60 full_size_above "$g" "$N" || { echo "N=$N: the job did not grow back after undrain" >&2; exit 1; }
    done
    "$BIN/hvctl" --head "$HEAD" events --job 1 --json --limit 100000 >"$D/events.json"
    if [ -n "$KEEP" ]; then
        mkdir -p "$KEEP/run$RUN"
        cp "$D/events.json" "$D/marks" "$D/sub.out" "$D/sub.err" "$D/head.out" "$D/head.err" \
            "$KEEP/run$RUN/" 2>/dev/null || true
    fi
    /usr/bin/python3 - "$N" "$D" "$RESULTS" <<'PY'
import json, re, statistics, sys
N, D, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lines = open(D + "/sub.out").read().splitlines()
ev = json.load(open(D + "/events.json"))["events"]
steps, resets, fails, lost = {}, {}, {}, []
for l in lines:
    m = re.search(r"BENCH (\w+) (\d+) gen=(\d+)(.*)", l)
    if not m:
        continue
    kind, t, g, rest = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    if kind == "step":
        steps[g] = min(steps.get(g, t), t)
    elif kind == "reset":
        resets[g] = max(resets.get(g, t), t)
    elif kind == "fail":
        fails[g] = min(fails.get(g, t), t)
    elif kind == "lost":
        lost.append((g, int(re.search(r"steps=(\d+)", rest).group(1))))
opened = {e["data"]["generation"]: e["time_ms"] for e in ev if e["kind"] == "round.open"}
closed = {e["data"]["generation"]: (e["time_ms"], e["data"]) for e in ev if e["kind"] == "round.close"}
marks = [l.split() for l in open(D + "/marks")]
def first_gen_after(g):
    later = sorted(x for x in steps if x > g)
    return later[0] if later else None
fail_lat, det, rnd, ring, first, drain_lat, join_lat = [], [], [], [], [], [], []
drain_lost = 0
fail_gens = set()
for kind, t, g, node in marks:
    t, g = int(t), int(g)
    ng = first_gen_after(g)
    if ng is None:
        continue
    if kind == "kill":
        fail_gens.add(ng)
        fail_lat.append(steps[ng] - t)
        if ng in opened:
            det.append(opened[ng] - t)
        if ng in opened and ng in closed:
            rnd.append(closed[ng][0] - opened[ng])
        if ng in closed and ng in resets:
            ring.append(resets[ng] - closed[ng][0])
        if ng in resets:
            first.append(steps[ng] - resets[ng])
    else:
        drain_lat.append(steps[ng] - t)
        drain_lost += sum(k for (lg, k) in lost if lg == ng)
for g, (t, d) in closed.items():
    if d["reason"].startswith("grow") and g in opened and g in steps:
        join_lat.append(steps[g] - opened[g])
fail_lost = [k for (g, k) in lost if g in fail_gens]
def mm(v):
    return ("%6.0f %6.0f" % (statistics.median(v), max(v))) if v else "     -      -"
row = "%3d  %s  %s  %s  %s  %s  %s  %s  %4.1f %5d" % (
    N, mm(fail_lat), mm(det), mm(rnd), mm(ring), mm(first), mm(join_lat), mm(drain_lat),
    (sum(fail_lost) / len(fail_lat)) if fail_lat else 0, drain_lost)
open(out, "a").write(row + "\n")
print(row, flush=True)
PY
    kill -INT "$SUB" 2>/dev/null || true
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    PIDS=""
    sleep 0.5
done
{
    echo "reset latency, ms (median, max over the resets); model $MODEL bytes, $(nproc) cores"
    echo "  N  failure(med max)  detect(med max)   round(med max)  ring+sync(med max) 1st-step(med max)  join(med max)  drain(med max)  lost/failure lost/all-drains"
    cat "$RESULTS"
} | tee "${OUT:-/dev/null}"
