#!/usr/bin/env bash
# bench_fleet_real.sh: bench_fleet.sh --real. The fleet benchmark through the binaries: a real
# hvhead (fleet.policy: fcfs, then fleet.policy: fleet), 4 hvagents of 2 slots on loopback, and a
# seeded workload submitted with hvsubmit at its Poisson arrival times; every job is
# examples/elastic_train (Fashion-MNIST, global batch 64) with --compute-ms-per-sample as its
# emulated accelerator, as bench_spot.sh does. The workload is fleetsim's (--print-workload) with
# shorter jobs (--steps 20:500 by default) so that one run takes 2-4 minutes:
#
#   tests/perf/bench_fleet.sh --real [--seeds 3 | --seeds "1 4 7"] [--jobs 24] [--steps 20:500]
#                                    [--interval-ms 3000] [--cap-s 900] [--logs DIR] [--build DIR]
#                                    [--policies "fcfs fleet"]
#
# Per policy and seed, from the head's own events (hvctl events --json): each job's JCT (its
# job.state "pending" event, the submission, to its last job.state event, its end), the average
# and p95 JCT, the makespan (first submission to last end), the top-priority jobs' wait (pending
# to the first "running"), resets per job (round.close events after a job's first round),
# rollbacks (a round that rolled back: steps lost) and the jobs that did not end 0. Then the
# median and worst over the seeds and the fleet's average JCT against fcfs per seed. Every run's
# logs stay under --logs (default a new /tmp/hvfleet-real.XXXXXX). A run not done within --cap-s
# is stopped and counted as such. Utilization is not read here (the simulation's column).
# --policies "fleet" with --logs DIR of an earlier run reruns one policy and tabulates it beside
# the other's runs kept there.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRC/build SEEDS=3 JOBS=24 STEPS=20:500 IV=3000 CAP=900 LOGS="" POLICIES="fcfs fleet"
while [ $# -gt 0 ]; do
    case $1 in
    --seeds) SEEDS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --interval-ms) IV=$2; shift 2 ;;
    --cap-s) CAP=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --policies) POLICIES=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) sed -n '2,25p' "$0" >&2; exit 2 ;;
    esac
done
case $SEEDS in *" "*) ;; *) SEEDS=$(seq 1 "$SEEDS" | tr '\n' ' ') ;; esac
BIN=$BUILD/bin TRAIN=$BUILD/examples/elastic_train
for b in "$BIN/hvhead" "$BIN/hvagent" "$BIN/hvsubmit" "$BIN/hvctl" "$BIN/fleetsim" "$TRAIN"; do
    [ -x "$b" ] || { echo "bench_fleet.sh --real: $b missing (build first)" >&2; exit 2; }
done
[ -n "$LOGS" ] || LOGS=$(mktemp -d /tmp/hvfleet-real.XXXXXX)
mkdir -p "$LOGS"
TOKEN=bench-fleet-token PIDS=""
cleanup() { for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

wait_line() { # SECS FILE PATTERN
    local i=0
    while [ $i -lt $(($1 * 10)) ]; do grep -q "$3" "$2" 2>/dev/null && return 0; sleep 0.1; i=$((i + 1)); done
    return 1
}

# run POLICY SEED: one run on its own head; leaves $DIR/events-JOB.json (hvctl events --json).
run() {
    local pol=$1 seed=$2 DIR=$LOGS/$1-seed$2
    rm -rf "$DIR"; mkdir -p "$DIR/data"
    export HV_TOKEN_FILE=$DIR/data/client.token
    cat >"$DIR/head.yaml" <<EOF
cluster_name: bench-fleet
listen: 127.0.0.1:0
data_dir: $DIR/data
token: $TOKEN
heartbeat_ms: 200
lease_ms: 3000
kill_grace_ms: 1000
log_level: info
elastic:
  rendezvous_timeout_s: 30
fleet:
  policy: $pol
  resize_interval_ms: $IV
EOF
    PIDS=""
    "$BIN/hvhead" start --config "$DIR/head.yaml" >"$DIR/head.out" 2>"$DIR/head.err" &
    PIDS="$PIDS $!"
    disown $!
    wait_line 15 "$DIR/head.out" 'listening on' || { echo "hvhead did not start ($DIR)" >&2; return 1; }
    local HEAD; HEAD=$(grep 'listening on' "$DIR/head.out" | tail -n 1 | sed -E 's/.*listening on ([^ ]+) .*/\1/')
    for a in a b c d; do
        "$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name "node-$a" --slots 2 \
            --work-dir "$DIR/agent-$a" >"$DIR/agent-$a.out" 2>"$DIR/agent-$a.err" &
        PIDS="$PIDS $!"
        disown $!
        wait_line 15 "$DIR/agent-$a.out" joined || { echo "hvagent node-$a did not join" >&2; return 1; }
    done
    "$BIN/fleetsim" --seed "$seed" --jobs "$JOBS" --steps "$STEPS" --interval-ms "$IV" \
        --print-workload >"$DIR/workload.txt"
    local t0 subs="" at id args now
    t0=$(date +%s.%N)
    while IFS=$'\t' read -r at id args; do
        case $at in '#'*) continue ;; esac
        now=$(date +%s.%N)
        sleep "$(awk -v a="$at" -v t="$t0" -v n="$now" 'BEGIN { d = t + a - n; print (d > 0 ? d : 0) }')"
        local hv=${args%% -- *} prog=${args#* -- elastic_train }
        # shellcheck disable=SC2086
        "$BIN/hvsubmit" --head "$HEAD" --quiet $hv "$TRAIN" --test-limit 500 $prog \
            >"$DIR/job-$id.out" 2>"$DIR/job-$id.err" &
        subs="$subs $!"
        PIDS="$PIDS $!"
        disown $!
    done <"$DIR/workload.txt"
    local i=0 left=1 rc=0
    while [ $left -gt 0 ] && [ $i -lt $((CAP * 10)) ]; do
        left=0
        for p in $subs; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
        sleep 0.1; i=$((i + 1))
    done
    [ $left -eq 0 ] || { echo "$pol seed $seed: $left jobs not done within ${CAP}s (stopped)" >&2; rc=1; }
    for id in $(seq 1 "$JOBS"); do
        "$BIN/hvctl" --head "$HEAD" events --job "$id" --json --limit 10000 \
            >"$DIR/events-$id.json" 2>>"$DIR/events.err"
    done
    cleanup
    PIDS=""
    echo "$rc" >"$DIR/capped"
}

echo "bench_fleet --real $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?'): seeds $SEEDS, $JOBS jobs, steps $STEPS, 4 agents x 2 slots, resize interval $IV ms; logs $LOGS"
for seed in $SEEDS; do
    for pol in $POLICIES; do
        s=$(date +%s)
        run "$pol" "$seed"
        echo "  $pol seed $seed: $(( $(date +%s) - s )) s" >&2
    done
done
# The simulator's figures for the same workloads, beside (how well it models the binaries).
echo "fleetsim on the same workloads (seed by seed: its avg JCT for fcfs and fleet):"
for seed in $SEEDS; do
    "$BIN/fleetsim" --seed "$seed" --jobs "$JOBS" --steps "$STEPS" --interval-ms "$IV" \
        --policies "fcfs fleet" | awk -F'|' -v s="$seed" '$2 ~ /^ (fcfs|fleet) / {
        split($3, a, "/"); printf "  sim %s seed %s: avg JCT %.1f s, p95 %.1f s, makespan %.1f s\n", $2, s, a[1], $4 + 0, $5 + 0 }'
done
/usr/bin/python3 - "$LOGS" "$IV" $SEEDS <<'PY'
import json, math, os, statistics, sys
logs, iv, seeds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def one(pol, seed):
    d = os.path.join(logs, "%s-seed%s" % (pol, seed))
    evs = []
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.startswith("events-") and f.endswith(".json"):
            try:
                evs += json.load(open(os.path.join(d, f)))["events"]
            except (OSError, ValueError, KeyError):
                pass
    prio = {}
    for line in open(os.path.join(d, "workload.txt")):
        if not line.startswith("#"):
            at, jid, args = line.rstrip("\n").split("\t")
            a = args.split()
            prio[int(jid)] = int(a[a.index("--priority") + 1])
    sub, run, end, ok, rounds, rb = {}, {}, {}, {}, {}, 0
    for e in evs:
        j, k, t = e.get("job_id", 0), e["kind"], e["time_ms"] / 1000.0
        if not j:
            continue
        if k == "job.state":
            st = e.get("job_state", "")
            if st == "pending":
                sub.setdefault(j, t)
            elif st == "running":
                run.setdefault(j, t)
            elif st in ("succeeded", "failed", "cancelled", "lost"):
                end[j] = t
                ok[j] = st == "succeeded"
        elif k == "round.close":
            rounds[j] = rounds.get(j, 0) + 1
            rb += 1 if e["data"].get("rollback") else 0
    jobs = sorted(sub)
    if not jobs:
        return None
    # job ids are given in submission order, which is the workload's order
    top = max(prio.values())
    order = sorted(prio)
    byid = dict(zip(jobs, order))
    jct = [end[j] - sub[j] for j in jobs if j in end]
    hw = [run[j] - sub[j] for j in jobs if prio.get(byid[j], 0) == top and j in run]
    jct.sort()
    return {
        "done": len(jct), "n": len(jobs), "failed": sum(1 for j in jobs if not ok.get(j, False)),
        "avg": sum(jct) / len(jct) if jct else float("nan"),
        "p95": jct[max(0, math.ceil(0.95 * len(jct)) - 1)] if jct else float("nan"),
        "makespan": max(end.values()) - min(sub.values()) if end else float("nan"),
        "hw_med": statistics.median(hw) if hw else 0, "hw_max": max(hw) if hw else 0,
        "hw_in": sum(1 for w in hw if w <= iv / 1000 + 1) / len(hw) if hw else 1,
        "resets": sum(max(0, r - 1) for r in rounds.values()) / len(jobs),
        "rollbacks": rb,
    }

res = {p: {s: one(p, s) for s in seeds} for p in ("fcfs", "fleet")}
for p in res:
    for s in seeds:
        r = res[p][s]
        if r is None:
            print("%s seed %s: no events" % (p, s))
        else:
            print("%s\tseed %s\tavg %.1f\tp95 %.1f\tmakespan %.1f\ttop wait %.2f/%.2f\tresets/job %.2f\trollbacks %d\tdone %d/%d failed %d"
                  % (p, s, r["avg"], r["p95"], r["makespan"], r["hw_med"], r["hw_max"], r["resets"], r["rollbacks"], r["done"], r["n"], r["failed"]))
print()
print("| policy (through the binaries) | avg JCT s | p95 JCT s | makespan s | top-priority wait s (median) | top-priority wait s (worst) | resets per job | rounds rolled back (steps lost) | jobs not ended 0 | avg JCT vs fcfs | top-priority started within interval + 1 s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
def cell(vals, low_bad=False, fmt="%.1f"):
    v = [x for x in vals if x == x]
    if not v:
        return "-"
    return (fmt + " / " + fmt) % (statistics.median(v), min(v) if low_bad else max(v))
for p in ("fcfs", "fleet"):
    rs = [res[p][s] for s in seeds if res[p][s] is not None]
    if not rs:
        continue
    vs = []
    for s in seeds:
        a, b = res[p][s], res["fcfs"][s]
        if a and b:
            vs.append(a["avg"] / b["avg"] - 1)
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        p, cell([r["avg"] for r in rs]), cell([r["p95"] for r in rs]), cell([r["makespan"] for r in rs]),
        cell([r["hw_med"] for r in rs], fmt="%.2f"), cell([r["hw_max"] for r in rs], fmt="%.2f"),
        cell([r["resets"] for r in rs], fmt="%.2f"), cell([r["rollbacks"] for r in rs], fmt="%d"),
        cell([r["failed"] for r in rs], fmt="%d"),
        cell([x * 100 for x in vs], fmt="%+.1f%%"), cell([r["hw_in"] * 100 for r in rs], True, "%.0f%%")))
print("\nmedian / worst over seeds %s; JCT = the head's job.state events, pending to end." % " ".join(seeds))
PY
