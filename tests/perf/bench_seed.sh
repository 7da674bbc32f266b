#!/usr/bin/env bash
# bench_seed.sh: Uber's Horovod-on-Ray "seed experiment", scaled down to one small machine.
#
#   tests/perf/bench_seed.sh [--epochs N] [--train-limit N] [--test-limit N] [--period S]
#                            [--batch N] [--seeds "1 2"] [--grow-every K] [--configs "1 2 3 4 5"]
#                            [--compute-ms X] [--run-timeout S] [--out FILE] [--logs DIR]
#                            [--bin DIR]
#
# The same model (examples/elastic_train: an MLP on Fashion-MNIST, constant global batch
# --batch split across the ranks, so every configuration does the same optimisation per step)
# is trained for --epochs epochs in five ways, each as an elastic job on a fresh cluster of one
# head and 8 one-slot agents on this machine (loopback only):
#   1  fixed 8 workers                 -np 8 --min-np 1 --max-np 8, nothing resized
#   2  8 workers, +-1 every P s        the same; every P s (P = --period) node n8 is drained, P s
#                                      later undrained, and so on: 8 -> 7 -> 8 -> 7 ...
#   3  8 workers, +-3 every 3P s       the same with n6, n7, n8 every 3P s: 8 -> 5 -> 8 -> 5 ...
#   4  fixed 2 workers                 -np 2 --min-np 1 --max-np 2
#   5  2 -> 4 -> 8 workers             --grow 0:2,K:4,2K:8 --max-np 8 (K = --grow-every, default
#                                      epochs/3 as in the original's 0:2,30:4,60:8 over 90
#                                      epochs); all 8 agents are up, the schedule limits the job
# Every job is submitted elastic (also the fixed ones, with nothing resized) so that all five
# pay the same per-step cost (a commit and a membership check every step). A resize is a drain
# (`hvctl drain NODE...`: the job leaves the nodes at its next commit, no rollback) and an undrain
# (`hvctl undrain NODE...`: the free slot makes the head place a worker there, which joins at the
# members' next check); agents stay up, so no process start-up of an agent is in the resize.
# The resize clock starts once the job's 8 workers are running and stops when hvsubmit exits.
# Blacklisting is off (a drain is no failure anyway) and --max-resets is unlimited.
# A step's time follows the job's size as on real machines: each worker sleeps --compute-ms per
# sample of its share of the global batch (elastic_train --compute-ms-per-sample, an
# accelerator's time), so 8 workers step 4x faster than 2 even on this machine's 2 cores
# (--compute-ms 0 measures this host's cores instead, where fewer workers run faster).
#
# Prints the parameters and a markdown table: configuration, workers, epochs, final test accuracy
# (elastic_train's `done` line), wall time (hvsubmit start to exit), resets (hvsubmit's last line,
# else the done line) and a note (the size at each epoch's end, resizes done, schedule check).
# Writes the table to --out FILE if given; each run's hvsubmit stdout/stderr and resize log go to
# --logs DIR (default: FILE's name with .logs, else a new /tmp/hvseed-logs.XXXXXX; kept).
# Exit status 0 when every run succeeded, 1 otherwise (the table says which).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$SRC/build/bin
TRAIN=""
EPOCHS=9
TRAIN_LIMIT=12000
COMPUTE_MS=2
TEST_LIMIT=10000
PERIOD=10
BATCH=64
SEEDS="1"
GROW_EVERY=""
CONFIGS="1 2 3 4 5"
RUN_TIMEOUT=480
OUT=""
LOGS=""
NAGENTS=8
usage() {
    cat >&2 <<EOF
usage: $0 [--epochs N] [--train-limit N] [--test-limit N] [--period S] [--batch N]
          [--seeds "1 2"] [--grow-every K] [--configs "1 2 3 4 5"] [--run-timeout S]
          [--out FILE] [--logs DIR] [--bin DIR]
defaults: --epochs 9 --train-limit 12000 --test-limit 10000 --period 10 --batch 64 --compute-ms 2
          --seeds "1" --grow-every epochs/3 --run-timeout 480 --configs "1 2 3 4 5"
EOF
    exit 2
}
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
    --epochs) EPOCHS=$2 ;;
    --train-limit) TRAIN_LIMIT=$2 ;;
    --test-limit) TEST_LIMIT=$2 ;;
    --period) PERIOD=$2 ;;
    --batch) BATCH=$2 ;;
    --compute-ms) COMPUTE_MS=$2 ;;
    --seeds) SEEDS=$2 ;;
    --grow-every) GROW_EVERY=$2 ;;
    --configs) CONFIGS=$2 ;;
    --run-timeout) RUN_TIMEOUT=$2 ;;
    --out) OUT=$2 ;;
    --logs) LOGS=$2 ;;
    --bin) BIN=$2 ;;
    *) usage ;;
    esac
    shift 2
done
is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
for v in "$EPOCHS" "$TRAIN_LIMIT" "$TEST_LIMIT" "$PERIOD" "$BATCH" "$RUN_TIMEOUT"; do
    if ! is_uint "$v" || [ "$v" -eq 0 ]; then echo "bench_seed: '$v' is not a positive integer" >&2; usage; fi
done
[ -n "$GROW_EVERY" ] || GROW_EVERY=$(( EPOCHS / 3 ))
[ "$GROW_EVERY" -ge 1 ] || GROW_EVERY=1
is_uint "$GROW_EVERY" || usage
GROW="0:2,$GROW_EVERY:4,$(( 2 * GROW_EVERY )):8"
for c in $CONFIGS; do case $c in 1 | 2 | 3 | 4 | 5) ;; *) echo "bench_seed: no configuration $c" >&2; usage ;; esac; done
for s in $SEEDS; do is_uint "$s" || { echo "bench_seed: seed '$s' is not a number" >&2; usage; }; done
TRAIN=$(cd "$BIN/.." && pwd)/examples/elastic_train
for b in "$BIN/hvhead" "$BIN/hvagent" "$BIN/hvsubmit" "$BIN/hvctl" "$TRAIN"; do
    [ -x "$b" ] || { echo "bench_seed: build first: $b" >&2; exit 2; }
done
if [ -z "$LOGS" ]; then
    if [ -n "$OUT" ]; then LOGS=${OUT%.*}.logs; else LOGS=$(mktemp -d /tmp/hvseed-logs.XXXXXX); fi
fi
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)

TMP=$(mktemp -d /tmp/hvseed.XXXXXX)
PIDS=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    # workers run in their own process groups: kill whatever still runs from our temp dir
    for p in $(pgrep -f "$TMP" 2>/dev/null) $(workers "$TMP"); do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
now_ms() { date +%s%3N; }
wait_for() { # SECONDS CMD...: polls CMD every 0.1 s; 1 on timeout
    local i=0 n=$(( $1 * 10 )); shift
    while ! "$@" >/dev/null 2>&1; do i=$((i + 1)); [ $i -ge $n ] && return 1; sleep 0.1; done
}
# workers DIR: pids of the processes whose cwd is a job dir of an agent under DIR.
workers() {
    { find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$1/*agent-*/jobs/*" 2>/dev/null || true; } | cut -d/ -f3
}
workers_at_least() { [ "$(workers "$1" | wc -l)" -ge "$2" ]; }
ctl() { "$BIN/hvctl" --head "$HEAD" "$@"; }

# start_cluster DIR: a head and $NAGENTS one-slot agents n1..n8; sets HEAD.
start_cluster() {
    local d=$1 i
    mkdir -p "$d"
    cat >"$d/head.yaml" <<EOF
cluster_name: seed
listen: 127.0.0.1:0
data_dir: $d/data
token: seed-token
heartbeat_ms: 200
lease_ms: 2000
kill_grace_ms: 1000
log_level: notice
elastic:
  rendezvous_timeout_s: 20
  max_resets: 1000000
  blacklist_cooldown_s: 0
  blacklist_max_cooldown_s: 0
  blacklist_max_strikes: 0
EOF
    export HV_TOKEN_FILE=$d/data/client.token # the CLIs' credential, written by the head
    "$BIN/hvhead" start --config "$d/head.yaml" >"$d/head.out" 2>"$d/head.err" &
    PIDS="$PIDS $!"
    disown $! # no "Killed" line from bash when stop_cluster ends it
    wait_for 15 grep -q 'listening on' "$d/head.out" || { echo "bench_seed: the head did not start" >&2; tail "$d/head.err" >&2; return 1; }
    HEAD=$(sed -nE 's/.*listening on ([^ ]+).*/\1/p' "$d/head.out" | head -n 1)
    for i in $(seq 1 "$NAGENTS"); do
        "$BIN/hvagent" join "$HEAD" --token seed-token --name "n$i" --slots 1 \
            --work-dir "$d/agent-n$i" >"$d/agent-n$i.out" 2>"$d/agent-n$i.err" &
        PIDS="$PIDS $!"
        disown $!
    done
    for i in $(seq 1 "$NAGENTS"); do
        wait_for 30 grep -q joined "$d/agent-n$i.out" || { echo "bench_seed: agent n$i did not join" >&2; tail "$d/agent-n$i.err" >&2; return 1; }
    done
}

stop_cluster() {
    local p
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $(pgrep -f "$1" 2>/dev/null) $(workers "$1"); do kill -KILL "$p" 2>/dev/null || true; done
    PIDS=""
}

label() {
    case $1 in
    1) echo "1. fixed 8" ;;
    2) echo "2. 8, ±1 every ${PERIOD}s" ;;
    3) echo "3. 8, ±3 every $((3 * PERIOD))s" ;;
    4) echo "4. fixed 2" ;;
    5) echo "5. 2→4→8 (grow $GROW)" ;;
    esac
}
workers_col() {
    case $1 in
    1) echo "8" ;;
    2) echo "8±1/${PERIOD}s" ;;
    3) echo "8±3/$((3 * PERIOD))s" ;;
    4) echo "2" ;;
    5) echo "2→8" ;;
    esac
}

ROWS=$TMP/rows.md
: >"$ROWS"
FAILED=0

# run CFG SEED: one configuration on a fresh cluster; appends a table row.
run() {
    local cfg=$1 seed=$2 d=$TMP/c$1-s$2 name=c$1-seed$2 opts step=0 every=0 nodes=""
    local sub rc=0 t0 t1 started=0 next=0 down=0 drains=0 undrains=0 timed_out=0 n
    start_cluster "$d" || { echo "| $(label "$cfg") | $(workers_col "$cfg") | $EPOCHS | - | - | - | seed $seed: cluster did not start |" >>"$ROWS"; FAILED=1; stop_cluster "$d"; return 0; }
    case $cfg in
    1) opts="-np 8 --min-np 1 --max-np 8" ;;
    2) opts="-np 8 --min-np 1 --max-np 8"; step=1; every=$PERIOD ;;
    3) opts="-np 8 --min-np 1 --max-np 8"; step=3; every=$((3 * PERIOD)) ;;
    4) opts="-np 2 --min-np 1 --max-np 2" ;;
    5) opts="--grow $GROW --min-np 1 --max-np 8" ;;
    esac
    for n in $(seq $((NAGENTS - step + 1)) "$NAGENTS"); do [ "$step" -gt 0 ] && nodes="$nodes n$n"; done
    : >"$LOGS/$name.resizes"
    echo "bench_seed: $(label "$cfg"), seed $seed: hvsubmit $opts ... (log $LOGS/$name.out)" >&2
    t0=$(now_ms)
    # shellcheck disable=SC2086
    "$BIN/hvsubmit" --head "$HEAD" --name "seed-c$cfg" --max-resets 1000000 --blacklist-cooldown 0:0 $opts \
        "$TRAIN" --epochs "$EPOCHS" --batch "$BATCH" --seed "$seed" \
        --train-limit "$TRAIN_LIMIT" --test-limit "$TEST_LIMIT" \
        --compute-ms-per-sample "$COMPUTE_MS" \
        >"$LOGS/$name.out" 2>"$LOGS/$name.err" &
    sub=$!
    PIDS="$PIDS $sub"
    while kill -0 "$sub" 2>/dev/null; do
        if [ $(( $(now_ms) - t0 )) -ge $(( RUN_TIMEOUT * 1000 )) ]; then
            timed_out=1
            echo "$(now_ms) run timeout (${RUN_TIMEOUT}s): cancelling" >>"$LOGS/$name.resizes"
            kill -INT "$sub" 2>/dev/null || true
            wait_for 20 sh -c "! kill -0 $sub" || kill -KILL "$sub" 2>/dev/null || true
            break
        fi
        if [ "$step" -gt 0 ]; then
            if [ "$started" = 0 ]; then
                # the resize clock starts when the job's 8 workers run
                if workers_at_least "$d" 8; then
                    started=1; next=$(( $(now_ms) + every * 1000 ))
                    echo "$(now_ms) 8 workers running; resizing by $step every ${every}s" >>"$LOGS/$name.resizes"
                fi
            elif [ "$(now_ms)" -ge "$next" ]; then
                # one call for all the nodes: the job re-forms once per resize
                # shellcheck disable=SC2086
                if [ "$down" = 0 ]; then
                    ctl drain $nodes --reason "bench_seed: -$step" >>"$LOGS/$name.resizes" 2>&1 || true
                else
                    ctl undrain $nodes --reason "bench_seed: +$step" >>"$LOGS/$name.resizes" 2>&1 || true
                fi
                if [ "$down" = 0 ]; then drains=$((drains + 1)); down=1; else undrains=$((undrains + 1)); down=0; fi
                echo "$(now_ms) $([ "$down" = 1 ] && echo drained || echo undrained)$nodes" >>"$LOGS/$name.resizes"
                next=$(( next + every * 1000 ))
            fi
        fi
        sleep 0.1
    done
    wait "$sub" 2>/dev/null || rc=$?
    t1=$(now_ms)
    ctl events --job 1 --limit 100000 >"$LOGS/$name.events" 2>&1 || true
    stop_cluster "$d"

    # ---- the row
    local out=$LOGS/$name.out err=$LOGS/$name.err acc resets wall sizes rounds note inexact last
    acc=$(sed -n 's/.*elastic_train: done .*accuracy=\([0-9.]*\).*/\1/p' "$out" | tail -n 1)
    resets=$(cat "$out" "$err" | sed -n 's/.*generation [0-9]*, [0-9]* workers\{0,1\}, \([0-9]*\) resets\{0,1\}.*/\1/p' | tail -n 1)
    [ -n "$resets" ] || resets=$(sed -n 's/.*elastic_train: done .*resets=\([0-9]*\).*/\1/p' "$out" | tail -n 1)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
    sizes=$(sed -n 's/.*elastic_train: epoch=[0-9]* size=\([0-9]*\) .*/\1/p' "$out" | paste -sd, -)
    inexact=$(grep 'elastic_train: epoch=' "$out" | grep -vc 'duplicates=0 exact=1' || true)
    # the size of every round (generation), from hvsubmit's "generation G: W workers" lines
    rounds=$(sed -n 's/^hvsubmit: generation [0-9]*: \([0-9]*\) workers\{0,1\} .*/\1/p' "$err" | paste -sd'>' - | sed 's/>/→/g')
    note="seed $seed; size at epoch ends: ${sizes:-none}; rounds: ${rounds:-none}"
    [ "$step" -gt 0 ] && note="$note; drained $drains, undrained $undrains times:$nodes"
    if [ "$cfg" = 5 ] && [ -n "$sizes" ]; then
        # the schedule's size at epoch e: 2 before K, 4 before 2K, then 8; never above it, and
        # reached by the end of the last epoch of each stage that has 2 epochs or more (the
        # resize is asked for at the stage's first epoch; its workers join during it)
        local e=0 want bad="" stage_end
        for n in ${sizes//,/ }; do
            want=$(( e < GROW_EVERY ? 2 : e < 2 * GROW_EVERY ? 4 : 8 ))
            stage_end=$(( e < GROW_EVERY ? GROW_EVERY - 1 : e < 2 * GROW_EVERY ? 2 * GROW_EVERY - 1 : EPOCHS - 1 ))
            [ "$n" -le "$want" ] || bad="$bad epoch $e has $n > $want;"
            if [ "$e" -eq "$stage_end" ] && [ "$GROW_EVERY" -ge 2 ] && [ "$n" -ne "$want" ]; then
                bad="$bad epoch $e ends at $n, not $want;"
            fi
            e=$((e + 1))
        done
        if [ -z "$bad" ]; then note="$note; schedule followed"; else note="$note; SCHEDULE NOT FOLLOWED:$bad"; FAILED=1; fi
    fi
    [ "${inexact:-0}" -eq 0 ] || note="$note; $inexact epochs not exact"
    if [ "$timed_out" = 1 ] || [ "$rc" -ne 0 ] || [ -z "$acc" ]; then
        FAILED=1
        last=$(grep -v '^\[' "$err" | tail -n 1 | tr '|' '/')
        note="FAILED (hvsubmit rc $rc$([ "$timed_out" = 1 ] && echo ", timed out after ${RUN_TIMEOUT}s"): ${last:-see $err}; $note"
    fi
    echo "| $(label "$cfg") | $(workers_col "$cfg") | $EPOCHS | ${acc:--} | $wall | ${resets:--} | $note |" >>"$ROWS"
    echo "bench_seed: $(label "$cfg"), seed $seed: accuracy ${acc:--}, ${wall}s, resets ${resets:--}" >&2
}

T_START=$(now_ms)
for seed in $SEEDS; do
    for cfg in $CONFIGS; do
        run "$cfg" "$seed"
    done
done
TOTAL=$(awk -v a="$T_START" -v b="$(now_ms)" 'BEGIN { printf "%.0f", (b - a) / 1000 }')

{
    echo "seed experiment (scaled down): elastic_train on Fashion-MNIST, MLP 784-256-128-10"
    echo "parameters: --epochs $EPOCHS --train-limit $TRAIN_LIMIT --test-limit $TEST_LIMIT --batch $BATCH (global, constant) --compute-ms $COMPUTE_MS (per sample of a worker's share) --period $PERIOD (P) --seeds \"$SEEDS\" --grow $GROW"
    echo "cluster: 1 head + $NAGENTS one-slot agents per run, loopback; $(nproc) cores; every job elastic (--min-np 1, --max-resets 1000000, no blacklist); resize = hvctl drain/undrain; total ${TOTAL}s"
    echo "logs: $LOGS"
    echo
    echo "| configuration | workers | epochs | final test accuracy | wall time (s) | resets | note |"
    echo "|---|---|---|---|---|---|---|"
    cat "$ROWS"
} | tee "${OUT:-/dev/null}"
exit "$FAILED"
