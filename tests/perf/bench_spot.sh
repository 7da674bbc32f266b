#!/usr/bin/env bash
# bench_spot.sh: spot economics on the simulated preemptible cloud, one command.
#
#   tests/perf/bench_spot.sh [--epochs 5] [--train-limit 6000] [--workers 4] [--compute-ms 2]
#                            [--scale 10] [--rates "300 60 20"] [--notice 120] [--boot 60:90]
#                            [--no-notice 0.1] [--seed 1 | --seeds N | --seeds "3 17 33"]
#                            [--cap-factor 4] [--policies "elastic hybrid restart"] [--out FILE]
#                            [--logs DIR] [--trace FILE [--trace-start TICK|full]
#                            [--trace-nodes M] [--fallback "spot ondemand"]] [--spare-rate 20]
#                            [--fallback-delay 0] [--baseline-every K] [--ab DIR [--ab-label L]]
#
# The same training work (elastic_train on Fashion-MNIST: --epochs over --train-limit samples,
# a constant global batch of 64, a step's time set by --compute-ms per sample of each worker's
# share, as an accelerator would) is run on a head whose autoscaler buys one-slot nodes from
# spot-sim, each run on its own head:
#   on-demand          on-demand nodes (price 0.40/h), no preemptions;
#   hv elastic @ R     spot nodes (0.10/h), one preemption every R seconds on average across the
#                      spot nodes, --no-notice of them without notice, the rest with a --notice
#                      s notice (a drain); the job is elastic (-np W --min-np 1 --max-np W) and
#                      re-forms in place;
#   hv+ckpt @ R        hv elastic as above, and as a last resort (every node holding the state
#                      lost at once) the job is submitted again (hvsubmit --retries) and resumes
#                      from the checkpoint elastic_train writes at every epoch's end;
#   hv+spare @ R       hv elastic, and the autoscaler keeps one idle spare spot node (max_nodes
#                      W + 1) while the measured preemption rate is at least --spare-rate an
#                      hour of cloud time (autoscaler.spare_preemptions_per_hour, over a 600 s
#                      window); the spare's cost is in the run's cost (policy "spare");
#   restart @ R        the same cloud and seed, the restart-the-job policy of TorchElastic, Ray
#                      Train and SkyPilot: a fixed-size job (-np W) that any membership change
#                      fails, submitted again (hvsubmit --retries) and resumed from the program's
#                      checkpoint, written at every epoch's end (hv_state_save).
# Times are the cloud's divided by --scale (default 10: a 60 s interval runs as 6 s, a 120 s
# notice as 12 s, a 60-90 s boot as 6-9 s); reset and restart costs are not scaled, which makes
# the scaled runs harder on both policies than the cloud would be.
# Per run: wall time (submission to hvsubmit's exit), cost (hvctl cost: every instance from its
# launch), cost per useful step, goodput (useful steps / steps started, from elastic_train's
# --step-log; a step redone after a rollback or a restart counts twice), steps lost, and the
# preemptions. A run that does not finish within --cap-factor x the on-demand wall time is
# stopped and shown as such. Prints a markdown table; --out FILE writes it there too.
#
# --seeds N (seeds 1..N) or --seeds "LIST": the distribution over many seeds instead of one run
# per policy. On demand runs once (it has no preemptions: its seed changes nothing) as the
# baseline; then every rate x policy (default policy: elastic) runs once per seed, each on its
# own head and each with its cap. A run *completes* when hvsubmit exits 0; it is *exact* when
# elastic_train's --epoch-log holds one line per epoch, every one "duplicates=0 exact=1" (each
# sample processed once). Per rate x policy the summary gives: completed and exact of N, wall
# time and cost per useful step against on demand (median and worst of the completed runs),
# goodput and steps lost (median and worst), preemptions (median, max) and the seeds that did not
# complete or were not exact. Every run's row goes to DIR/runs.tsv as it ends (--logs DIR,
# default a new /tmp/hvspot-logs.XXXXXX, kept); a run that did not complete or was not exact
# keeps its head's log, hvsubmit's output, the events, `hvctl job` and the step and epoch logs
# under DIR/NAME-seedS/; every run's events go to DIR/events-NAME-seedS.txt (notices, launches,
# joins, hand-backs: the autoscaler's timing).
#
# --trace FILE: instead of the random preemptions, replay a real spot trace (the JSON of
# ../shared/data/spot-traces: instances available or still running every gap_seconds), turned
# into a spot-sim schedule by spot_trace (tests/perf/spot_trace.c): its counts scaled to the
# --workers spot nodes (round(N x W / M), M the trace's largest count or --trace-nodes), its
# ticks divided by --scale like every other cloud time, from --trace-start (default full: the
# first tick at which all W nodes could be had; or a tick index). Each drop is that many
# preemptions landing at the tick, each with the --notice before it (scaled) except a --no-notice
# share without one (every 1/F-th, deterministically), then the lower capacity; each rise is
# capacity the autoscaler may buy (a launch beyond the capacity is refused, as a cloud's
# InsufficientInstanceCapacity). The spot runs (not the on-demand baseline) replay the same
# schedule; the rows are named POLICY@trace. --fallback "spot ondemand" lets the autoscaler buy
# on-demand nodes while spot has no capacity (default: spot only, the job waits). The type that a
# refused launch sets aside comes back after 300 s of cloud time (scaled). --fallback-delay S
# (cloud seconds, scaled; default 0): autoscaler.fallback_delay_s, a running job's on-demand
# fallback waits while spot has been short for less than S (policy rule 9). The summary also
# gives the window's bound (spot_trace --bound, for a job as long as the on-demand run): what no
# policy could beat there, the work scaling linearly with the nodes and nothing else lost.
#
# --baseline-every K: the on-demand run is repeated after every K spot runs (default 5 with
# --seeds, else 0: once), and each spot run is set against the latest on-demand run before it:
# the machine's load drifts over a long run, and the ratios are side by side, not against a
# baseline measured at another load. Each row also says where the time went, from the run's
# events: below_full_s (seconds from the first round to the end with fewer than W workers),
# missing_worker_s (worker-seconds below W over that time), rounds and rollbacks.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$SRC/build/bin
EXB=$SRC/build/examples
EPOCHS=5 TRAIN_LIMIT=6000 WORKERS=4 COMPUTE_MS=2 SCALE=10 RATES="300 60 20" NOTICE=120
BOOT=60:90 NO_NOTICE=0.1 SEED=1 SEEDS="" CAP=4 OUT="" POLICIES="" LOGS=""
TRACE="" TRACE_START=full TRACE_NODES="" FALLBACK=spot SPARE_RATE=20 FALLBACK_DELAY=0 BASE_EVERY=
AB="" AB_LABEL=before
while [ $# -gt 0 ]; do
    case $1 in
    --epochs) EPOCHS=$2; shift 2 ;;
    --train-limit) TRAIN_LIMIT=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --compute-ms) COMPUTE_MS=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --notice) NOTICE=$2; shift 2 ;;
    --boot) BOOT=$2; shift 2 ;;
    --no-notice) NO_NOTICE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --cap-factor) CAP=$2; shift 2 ;;
    --policies) POLICIES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --trace) TRACE=$2; shift 2 ;;
    --trace-start) TRACE_START=$2; shift 2 ;;
    --trace-nodes) TRACE_NODES=$2; shift 2 ;;
    --fallback) FALLBACK=$2; shift 2 ;;
    --spare-rate) SPARE_RATE=$2; shift 2 ;;
    --fallback-delay) FALLBACK_DELAY=$2; shift 2 ;;
    --baseline-every) BASE_EVERY=$2; shift 2 ;;
    --ab) AB=$2; shift 2 ;;
    --ab-label) AB_LABEL=$2; shift 2 ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
    esac
done
if [ -n "$SEEDS" ]; then
    case $SEEDS in
    *[!0-9\ ]* | "") echo "bench_spot: --seeds: expected a count N or a list of seeds like \"3 17 33\"" >&2; exit 2 ;;
    *\ *) ;;
    *) [ "$SEEDS" -ge 1 ] || { echo "bench_spot: --seeds: expected at least 1" >&2; exit 2; }
       SEEDS=$(seq -s ' ' 1 "$SEEDS") ;;
    esac
    [ -n "$POLICIES" ] || POLICIES=elastic
    [ -n "$LOGS" ] || LOGS=$(mktemp -d /tmp/hvspot-logs.XXXXXX)
fi
[ -n "$POLICIES" ] || POLICIES="elastic hybrid restart"
if [ -n "$LOGS" ]; then
    mkdir -p "$LOGS" || { echo "bench_spot: cannot make --logs $LOGS" >&2; exit 2; }
    LOGS=$(cd "$LOGS" && pwd)
fi
[ -x "$BIN/hvhead" ] && [ -x "$EXB/elastic_train" ] || { echo "build first (cmake --build build)" >&2; exit 2; }
if [ -n "$AB" ]; then
    [ -x "$AB/bin/hvhead" ] && [ -x "$AB/bin/hvagent" ] && [ -x "$AB/examples/elastic_train" ] ||
        { echo "bench_spot: --ab $AB: expected a build with bin/hvhead, bin/hvagent and examples/elastic_train" >&2; exit 2; }
fi
TMP=$(mktemp -d /tmp/hvspot.XXXXXX)
HEAD_PID=""
cleanup() {
    [ -n "$HEAD_PID" ] && kill -KILL "$HEAD_PID" 2>/dev/null || true
    for p in $(pgrep -f "$TMP" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
ms() { awk -v s="$1" -v k="$SCALE" 'BEGIN { printf "%d", s * 1000 / k }'; }
secs() { awk -v s="$1" -v k="$SCALE" 'BEGIN { v = s / k; printf "%d", (v < 1 ? 1 : v + 0.5) }'; }
case $FALLBACK_DELAY in
'' | *[!0-9]*) echo "bench_spot: --fallback-delay: expected whole seconds of cloud time, got '$FALLBACK_DELAY'" >&2; exit 2 ;;
esac
[ -n "$BASE_EVERY" ] || { [ -n "$SEEDS" ] && BASE_EVERY=5 || BASE_EVERY=0; }
case $BASE_EVERY in
'' | *[!0-9]*) echo "bench_spot: --baseline-every: expected a count of spot runs (0: once), got '$BASE_EVERY'" >&2; exit 2 ;;
esac
case $FALLBACK in
spot | "spot ondemand") ;;
*) echo "bench_spot: --fallback: expected \"spot\" or \"spot ondemand\", got '$FALLBACK'" >&2; exit 2 ;;
esac
if [ -n "$TRACE" ]; then
    [ -x "$BIN/spot_trace" ] || { echo "build first (cmake --build build --target spot_trace)" >&2; exit 2; }
    # a parse error names the file, the line and the value (spot_trace's message)
    # the notice as spot-sim gives it (whole seconds after scaling), so that a noticed node goes
    # at the trace's tick
    "$BIN/spot_trace" "$TRACE" --nodes "$WORKERS" --scale "$SCALE" --notice "$(awk -v a="$(secs "$NOTICE")" -v k="$SCALE" 'BEGIN { print a * k }')" \
        --no-notice "$NO_NOTICE" --start "$TRACE_START" ${TRACE_NODES:+--trace-nodes "$TRACE_NODES"} \
        >"$TMP/trace.txt" 2>"$TMP/trace.err" || { sed 's/^/bench_spot: --trace: /' "$TMP/trace.err" >&2; exit 2; }
    RATES=trace
fi
BOOT_MIN=$(ms "${BOOT%%:*}") BOOT_MAX=$(ms "${BOOT##*:}")
STEPS_PER_EPOCH=$(( (TRAIN_LIMIT + 63) / 64 ))
USEFUL=$(( STEPS_PER_EPOCH * EPOCHS ))

# run NAME TYPE RATE_S POLICY SEED: one head, one job; appends a row to $TMP/rows (and to
# $LOGS/runs.tsv when --logs is given).
run() {
    local name=$1 type=$2 rate=$3 policy=$4 seed=$5
    local safe; safe=$(printf '%s' "$1" | tr -c 'A-Za-z0-9@.-' '_') # for paths (--ab's names)
    local d=$TMP/$safe-seed$5
    mkdir -p "$d"
    local preempt=0 trace_line=""
    if [ "$rate" = trace ]; then
        trace_line="    trace: $TMP/trace.txt"
    elif [ "$rate" != 0 ]; then
        preempt=$(secs "$rate")
    fi
    local fallback=$type
    [ "$type" = spot ] && fallback=$(echo "$FALLBACK" | sed 's/ /, /')
    local max_nodes=$WORKERS spare_line=""
    if [ "$policy" = spare ]; then
        # the threshold and the window in the head's (scaled) time
        max_nodes=$((WORKERS + 1))
        spare_line="  spare_preemptions_per_hour: $(awk -v r="$SPARE_RATE" -v k="$SCALE" 'BEGIN { print r * k }')
  spare_window_s: $(secs 600)"
    fi
    cat >"$d/head.yaml" <<Y
cluster_name: spot
listen: 127.0.0.1:0
data_dir: $d/data
token: bench
heartbeat_ms: 200
lease_ms: 2000
kill_grace_ms: 1000
log_level: notice
job_wait_timeout_s: 3600
elastic:
  rendezvous_timeout_s: 20
autoscaler:
  provider: spot-sim
  max_nodes: $max_nodes
$spare_line
  idle_timeout_s: 3600
  launch_timeout_s: 120
  set_aside_s: $(secs 300)
  fallback_delay_s: $( [ "$FALLBACK_DELAY" = 0 ] && echo 0 || secs "$FALLBACK_DELAY")
  node_types:
    spot: {slots: 1, preemptible: true, price_per_hour: 0.10, ondemand_price_per_hour: 0.40}
    ondemand: {slots: 1, price_per_hour: 0.40}
  fallback: [$fallback]
  spot_sim:
    seed: $seed
    boot_min_ms: $BOOT_MIN
    boot_max_ms: $BOOT_MAX
    preempt_every_s: $preempt
    notice_s: $(secs "$NOTICE")
    no_notice_fraction: $NO_NOTICE
$trace_line
Y
    # the type not in the fallback list must not be bought: give it no nodes
    [ "$fallback" = "spot, ondemand" ] || sed -i "s/^    $( [ "$type" = spot ] && echo ondemand || echo spot ): {slots: 1,/&  max_nodes: 0,/" "$d/head.yaml"
    "$BIN/hvhead" start --config "$d/head.yaml" >"$d/head.out" 2>"$d/head.err" &
    HEAD_PID=$!
    local i=0
    until grep -q 'listening on' "$d/head.out" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 100 ] && { cat "$d/head.err" >&2; exit 1; }; sleep 0.1
    done
    local head; head=$(sed -E -n 's/.*listening on ([^ ]+) .*/\1/p' "$d/head.out")
    export HV_TOKEN_FILE=$d/data/client.token
    local args=(--epochs "$EPOCHS" --train-limit "$TRAIN_LIMIT" --test-limit 2000 --batch 64
                --compute-ms-per-sample "$COMPUTE_MS" --step-log "$d/steps" --epoch-log "$d/epochs")
    local sub=(-np "$WORKERS")
    if [ "$policy" != restart ]; then
        sub+=(--min-np 1 --max-np "$WORKERS" --max-resets 100000 --elastic-timeout 3600
              --blacklist-cooldown 0:0)
    fi
    if [ "$policy" = hybrid ]; then
        sub+=(--retries 1000)
        args+=(--checkpoint "$d/ck")
    elif [ "$policy" = restart ]; then
        sub+=(--retries 1000)
        args+=(--checkpoint "$d/ck")
    fi
    local cap_s=100000
    [ -n "${OD_WALL:-}" ] && cap_s=$(awk -v w="$OD_WALL" -v c="$CAP" 'BEGIN { printf "%d", w * c + 30 }')
    local t0; t0=$(date +%s.%N)
    local rc=0
    timeout -s INT "$cap_s" "$BIN/hvsubmit" --head "$head" "${sub[@]}" "$EXB/elastic_train" "${args[@]}" \
        >"$d/sub.out" 2>"$d/sub.err" || rc=$?
    local t1; t1=$(date +%s.%N)
    "$BIN/hvctl" --head "$head" --json cost >"$d/cost.json" 2>/dev/null || echo '{}' >"$d/cost.json"
    "$BIN/hvctl" --head "$head" events --limit 100000 >"$d/events.txt" 2>/dev/null || true
    local job; job=$(sed -n 's/.*job \([0-9]*\) submitted.*/\1/p' "$d/sub.err" | head -n 1)
    [ -n "$job" ] && { "$BIN/hvctl" --head "$head" job "$job" >"$d/job.txt" 2>&1 || true; }
    kill -INT "$HEAD_PID" 2>/dev/null || true
    wait "$HEAD_PID" 2>/dev/null || true
    HEAD_PID=""
    for p in $(pgrep -f "$d/" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    local wall; wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    local started=0; [ -f "$d/steps" ] && started=$(wc -l <"$d/steps")
    local acc; acc=$(sed -n 's/.*elastic_train: done .*accuracy=\([0-9.]*\).*/\1/p' "$d/sub.out" | tail -n 1)
    local restarts; restarts=$(grep -c 'submitting it again' "$d/sub.err" || true)
    local pre; pre=$(grep -c 'autoscaler.preempted' "$d/events.txt" || true)
    local status=done; [ "$rc" -ne 0 ] && status="stopped (rc $rc)"
    [ "$name" = on-demand ] && [ "$rc" -eq 0 ] && OD_WALL=$wall && OD_CPS=""  # this run's own
    # exact: one --epoch-log line per epoch, each epoch once, every one "duplicates=0 exact=1"
    local exact=no
    if [ -f "$d/epochs" ] && [ "$(wc -l <"$d/epochs")" -eq "$EPOCHS" ] &&
        [ "$(grep -c 'duplicates=0 exact=1 ' "$d/epochs")" -eq "$EPOCHS" ] &&
        [ "$(sed -n 's/.*epoch=\([0-9]*\) .*/\1/p' "$d/epochs" | sort -un | wc -l)" -eq "$EPOCHS" ]; then
        exact=yes
    fi
    /usr/bin/python3 - "$d/cost.json" "$name" "$wall" "$started" "$USEFUL" "${acc:-}" "$restarts" \
        "$pre" "$status" "$seed" "$rate" "$policy" "$exact" "$d/events.txt" "$WORKERS" \
        "${OD_WALL:-$wall}" "${OD_CPS:-}" >>"$TMP/rows" <<'PY'
import datetime, json, re, sys
c = json.load(open(sys.argv[1]))
name, wall, started, useful, acc, restarts, pre, status, seed, rate, policy, exact, evf, w, \
    od_wall, od_cps = sys.argv[2:]
wall, started, useful, w = float(wall), int(started), int(useful), int(w)
cost = c.get("cost", 0.0)
done = status == "done"
# Where the time went (events at 1 s resolution): from the first round to the job's end, the
# seconds with fewer than W workers and the worker-seconds missing, the rounds, the rollbacks.
size, last, below, missing, rounds, rollbacks, end = 0, None, 0.0, 0.0, 0, 0, None
try:
    for line in open(evf):
        f = line.split(None, 6)
        if len(f) < 7 or not f[0].isdigit():
            continue
        t = datetime.datetime.strptime(f[1] + " " + f[2], "%Y-%m-%d %H:%M:%S").timestamp()
        m = re.match(r"generation \d+: (\d+) workers", f[6])
        if f[5] == "round.close" and m:
            if last is not None and size < w:
                below, missing = below + t - last, missing + (w - size) * (t - last)
            size, last, rounds = int(m.group(1)), t, rounds + 1
            rollbacks += "rolled back" in f[6]
        elif f[5] == "job.state" and re.search(r"succeeded|failed|cancelled", f[6]) and end is None:
            end = t
    if last is not None and end is not None and size < w:
        below, missing = below + end - last, missing + (w - size) * (end - last)
except OSError:
    pass
cps = cost / useful if done else ""
print("\t".join(str(x) for x in [name, wall, cost, cps, started,
      useful if done else "", (useful / started) if done and started else "",
      (started - useful) if done else "", pre, restarts, acc or "-", status, seed, rate, policy,
      exact, od_wall, od_cps or cps, "%.0f" % below, "%.0f" % missing, rounds, rollbacks]))
PY
    [ "$name" = on-demand ] && [ "$rc" -eq 0 ] && OD_CPS=$(tail -n 1 "$TMP/rows" | cut -f4)
    if [ -n "$LOGS" ]; then
        tail -n 1 "$TMP/rows" >>"$LOGS/runs.tsv"
        # every run's events (notices, launches, joins, hand-backs: the autoscaler's timing)
        # (a seed run again, as in --seeds "1 1 1", gets -2, -3, ...)
        local ev=$LOGS/events-$safe-seed$seed.txt k=1
        while [ -e "$ev" ]; do k=$((k + 1)); ev=$LOGS/events-$safe-seed$seed-$k.txt; done
        cp "$d/events.txt" "$ev" 2>/dev/null || true
        if [ "$status" != done ] || [ "$exact" != yes ]; then
            mkdir -p "$LOGS/$safe-seed$seed"
            cp "$d"/head.yaml "$d"/head.out "$d"/head.err "$d"/sub.out "$d"/sub.err "$d"/events.txt \
                "$LOGS/$safe-seed$seed/" 2>/dev/null || true
            cp "$d"/job.txt "$d"/steps "$d"/epochs "$LOGS/$safe-seed$seed/" 2>/dev/null || true
        fi
    fi
    echo "bench_spot: $name seed $seed: ${wall} s, $status, exact $exact, $(tail -n 1 "$TMP/rows" | cut -f3) cost, $started steps started, $pre preemptions" >&2
    rm -rf "$d"
}

echo "bench_spot: $WORKERS workers, $EPOCHS epochs x $STEPS_PER_EPOCH steps ($USEFUL useful steps), ${COMPUTE_MS} ms/sample, time scale 1/$SCALE, boot ${BOOT}s, notice ${NOTICE}s, ${NO_NOTICE} without notice, seed${SEEDS:+s} ${SEEDS:-$SEED}; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
[ -n "$LOGS" ] && printf 'run\twall_s\tcost\tcost_per_useful_step\tsteps_started\tuseful_steps\tgoodput\tsteps_lost\tpreemptions\trestarts\taccuracy\tstatus\tseed\trate_s\tpolicy\texact\tbaseline_wall_s\tbaseline_cost_per_useful_step\tbelow_full_s\tmissing_worker_s\trounds\trollbacks\n' >"$LOGS/runs.tsv"
ALL_SEEDS=${SEEDS:-$SEED}
SPOT_RUNS=0
run on-demand ondemand 0 elastic "${ALL_SEEDS%% *}"
[ -n "${OD_WALL:-}" ] || { echo "bench_spot: the on-demand baseline did not finish" >&2; exit 1; }
for r in $RATES; do
    for p in $POLICIES; do
        case $p in
        elastic) name="hv-elastic@${r}" ;;
        spare) name="hv+spare@${r}" ;;
        hybrid) name="hv+ckpt@${r}" ;;
        restart) name="restart@${r}" ;;
        *) echo "bench_spot: unknown policy $p" >&2; exit 2 ;;
        esac
        [ "$r" = trace ] || name=${name}s
        for s in $ALL_SEEDS; do
            # the other build first, then this one, at the same seed and load
            [ -z "$AB" ] || BIN=$AB/bin EXB=$AB/examples run "$name ($AB_LABEL)" spot "$r" "$p" "$s"
            run "$name" spot "$r" "$p" "$s"
            SPOT_RUNS=$((SPOT_RUNS + 1))
            # the baseline again, side by side with the spot runs that follow it
            if [ "$BASE_EVERY" -gt 0 ] && [ $((SPOT_RUNS % BASE_EVERY)) -eq 0 ]; then
                run on-demand ondemand 0 elastic "${ALL_SEEDS%% *}"
            fi
        done
    done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
if [ -n "$TRACE" ]; then
    # what no policy could beat on this window, for a job as long as the (last) on-demand run
    BOUND=$("$BIN/spot_trace" "$TRACE" --nodes "$WORKERS" --scale "$SCALE" --start "$TRACE_START" \
        ${TRACE_NODES:+--trace-nodes "$TRACE_NODES"} --bound "$OD_WALL" 2>&1 >/dev/null |
        sed -n 's/^spot_trace: bound //p')
    HV_TRACE_DESC="Preemptions from the trace $TRACE (fallback: $FALLBACK): $(head -n 1 "$TMP/trace.txt" | sed 's/^# spot_trace [^:]*: //'); $(sed 's/^spot_trace: [^:]*: //' "$TMP/trace.err"). Bound $BOUND."
    export HV_TRACE_DESC
fi
if [ -n "$SEEDS" ]; then
    /usr/bin/python3 - "$TMP/rows" "$WORKERS" "$EPOCHS" "$USEFUL" "$COMPUTE_MS" "$SCALE" "$BOOT" "$NOTICE" \
        "$NO_NOTICE" "$SEEDS" "$CAP" "$LOAD_END" <<'PY' | tee "${OUT:-/dev/null}"
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
w, e, useful, cms, scale, boot, notice, nn, seeds, cap, load = sys.argv[2:]
ods = [r for r in rows if r[0] == "on-demand"]
od_walls = [float(r[1]) for r in ods]
n = len(seeds.split())
print("Spot economics over %d seeds on spot-sim: %s one-slot nodes, %s epochs = %s useful steps, "
      "%s ms per sample, cloud times / %s (boot %s s, notice %s s, %s of preemptions without "
      "notice), a cap of %s x on demand + 30 s per run; on demand (the baseline, run %d times "
      "between the spot runs, each spot run set against the one before it) %s s, %.3g per useful "
      "step; load average at the end %s.\n"
      % (n, w, e, useful, cms, scale, boot, notice, nn, cap, len(ods),
         " / ".join("%.1f" % x for x in od_walls), float(ods[0][3]), load))
import os
if os.environ.get("HV_TRACE_DESC"):
    print(os.environ["HV_TRACE_DESC"] + "\n")
print("| run | completed | exact | wall vs on-demand (median / worst) | cost per useful step vs "
      "on-demand (median / worst) | goodput (median / worst) | steps lost (median / worst) | "
      "preemptions (median / max) | below full size, s (median / worst) | missing worker-s "
      "(median / worst) | rounds (median / max) | not completed or not exact |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
groups = {}
for r in rows:
    if r[0] != "on-demand":
        groups.setdefault(r[0], []).append(r)
def pct(x):
    return "%+.0f%%" % (100 * x)
for name, rs in groups.items():
    done = [r for r in rs if r[11] == "done"]
    exact = [r for r in done if r[15] == "yes"]
    bad = ["%s (%s)" % (r[12], r[11] if r[11] != "done" else "not exact") for r in rs
           if r[11] != "done" or r[15] != "yes"]
    pre = sorted(int(r[8]) for r in rs)
    cells = ["%d of %d" % (len(done), len(rs)), "%d of %d" % (len(exact), len(rs))]
    if done:
        walls = [float(r[1]) / float(r[16]) - 1 for r in done]
        cps = [float(r[3]) / float(r[17]) - 1 for r in done]
        good = [float(r[6]) for r in done]
        lost = [int(r[7]) for r in done]
        cells += ["%s / %s" % (pct(statistics.median(walls)), pct(max(walls))),
                  "%s / %s" % (pct(statistics.median(cps)), pct(max(cps))),
                  "%.1f%% / %.1f%%" % (100 * statistics.median(good), 100 * min(good)),
                  "%g / %d" % (statistics.median(lost), max(lost))]
    else:
        cells += ["-", "-", "-", "-"]
    below = [float(r[18]) for r in rs]
    miss = [float(r[19]) for r in rs]
    nr = [int(r[20]) for r in rs]
    cells += ["%g / %d" % (statistics.median(pre), pre[-1]),
              "%g / %g" % (statistics.median(below), max(below)),
              "%g / %g" % (statistics.median(miss), max(miss)),
              "%g / %d" % (statistics.median(nr), max(nr)), ", ".join(bad) or "none"]
    print("| %s | %s |" % (name, " | ".join(cells)))
PY
    echo "bench_spot: every run's row is in $LOGS/runs.tsv" >&2
    exit 0
fi
/usr/bin/python3 - "$TMP/rows" "$WORKERS" "$EPOCHS" "$USEFUL" "$COMPUTE_MS" "$SCALE" "$BOOT" "$NOTICE" "$NO_NOTICE" "$SEED" <<'PY' | tee "${OUT:-/dev/null}"
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
w, e, useful, cms, scale, boot, notice, nn, seed = sys.argv[2:]
print("Spot economics on spot-sim: %s one-slot nodes, %s epochs = %s useful steps, %s ms per sample, "
      "cloud times / %s (boot %s s, notice %s s, %s of preemptions without notice), seed %s.\n"
      % (w, e, useful, cms, scale, boot, notice, nn, seed))
import os
if os.environ.get("HV_TRACE_DESC"):
    print(os.environ["HV_TRACE_DESC"] + "\n")
print("| run | exact | wall s | vs on-demand | cost | cost / useful step | vs on-demand | goodput | steps lost | preemptions | restarts | accuracy | below full size s | missing worker-s | rounds |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    name, wall, cost, cps, started, use, good, lost, pre, rest, acc, status = r[:12]
    exact, od_wall, od_cps, below, miss, nr = r[15], float(r[16]), r[17], r[18], r[19], r[20]
    wall, cost = float(wall), float(cost)
    if status != "done":
        print("| %s | %s | >%.0f (%s) | - | %.6f | - | - | - | - | %s | %s | - | %s | %s | %s |" % (name, exact, wall, status, cost, pre, rest, below, miss, nr))
        continue
    cps = float(cps)
    print("| %s | %s | %.1f | %+.0f%% | %.6f | %.3g | %+.0f%% | %.1f%% | %s | %s | %s | %s | %s | %s | %s |" % (
        name, exact, wall, 100 * (wall / od_wall - 1), cost, cps, 100 * (cps / float(od_cps) - 1),
        100 * float(good), lost, pre, rest, acc, below, miss, nr))
PY
