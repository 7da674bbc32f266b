#!/bin/sh
# tests/chaos/chaos.sh: a seeded chaos run against an elastic job, as a user who leaves a long
# job running would see it. A real head and one-slot agents (heartbeat 200 ms, lease 2 s) run
# examples/elastic_train through hvsubmit (-np 4 --min-np 1 --max-np 4 --max-resets 1000
# --elastic-timeout 60 --blacklist-cooldown 1:2); every 2-4 s one fault, drawn from the seed:
#   kill-worker   kill -9 of one of the job's workers
#   kill-agent    kill -9 of an agent and its workers; a fresh agent (a new name) joins 1 s later
#   drain         hvctl drain of a node, undrain 1.5 s later
#   drain-many    hvctl drain of two nodes at once, undrain 1.5 s later
#   stop-agent    SIGSTOP of an agent for longer than the lease (3.5 s), then SIGCONT
#   kill-head     kill -9 of the head, restarted on the same address and data directory
# One fault at a time (never more than one node down, apart from drain-many's two drained
# nodes). One more fault is aimed at the end of the training: when rank 0 starts one of the last
# steps of the last epoch (--step-log), where a job meets its end (issue 18). The run passes when hvsubmit exits 0, every epoch's line is in the epoch log exactly
# once with every sample processed once, and the last epoch's accuracy is over a floor.
# With --netns (where ip netns is permitted; exit 77 otherwise) the head and each agent run in
# their own network namespace, and one more fault is drawn:
#   link-down     a node's link set down for 3 s (longer than the lease), then up again
#
# It prints "chaos seed=S" and one line per fault ("t=12.3 fault=kill-worker node=c2 pid=..."),
# so a failure can be replayed: the same seed draws the same faults at the same times.
#
#   chaos.sh --seed S [--epochs E] [--train-limit N] [--accuracy-floor A] [--netns]
#   chaos.sh --seeds "S1 S2 ..." [same options]     one fresh cluster per seed, in turn
# Run through ctest (hv.chaos.ci), or by hand with HV_BIN_DIR/HV_EXAMPLES_DIR/HV_SRC_DIR set
# (tests/chaos/soak.sh sets them). Exit 0 when every seed passed.
set -u
SEED="" SEEDS="" EPOCHS=8 LIMIT=12000 FLOOR=0.65 STEP_MS=15 NETNS=0
while [ $# -gt 0 ]; do
    case "$1" in
    --seed) SEED=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --train-limit) LIMIT=$2; shift 2 ;;
    --accuracy-floor) FLOOR=$2; shift 2 ;;
    --step-delay-ms) STEP_MS=$2; shift 2 ;;
    --netns) NETNS=1; shift ;;
    *) echo "chaos.sh: unknown option $1" >&2; exit 64 ;;
    esac
done
if [ -n "$SEEDS" ]; then
    failed=""
    for s in $SEEDS; do
        # shellcheck disable=SC2046
        sh "$0" --seed "$s" --epochs "$EPOCHS" --train-limit "$LIMIT" \
            --accuracy-floor "$FLOOR" --step-delay-ms "$STEP_MS" $([ "$NETNS" = 1 ] && echo --netns) \
            || failed="$failed $s"
    done
    [ -z "$failed" ] || { echo "chaos: seeds that failed:$failed (replay: chaos.sh --seed S)" >&2; exit 1; }
    echo "PASS: chaos seeds $SEEDS"
    exit 0
fi
[ -n "$SEED" ] || { echo "chaos.sh: --seed S or --seeds LIST is required" >&2; exit 64; }

. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
HB_MS=200 LEASE_MS=2000
if [ "$NETNS" = 1 ]; then
    # --netns: the head and every agent in their own network namespace (10.203.0.0/24 on a
    # bridge in the head's), as tests/integration/elastic_netns.sh does; the CLIs run in the
    # head's namespace. Adds the fault link-down: a node's link set down for 3 s.
    P=hvc$$
    H=${P}h
    netns_cleanup() {
        for n in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$P"); do
            ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL; ip netns del "$n" 2>/dev/null
        done
        hv_cleanup
    }
    trap netns_cleanup EXIT
    if ! ip netns add "$H" 2>/dev/null; then echo "SKIP: ip netns is not permitted here"; exit 77; fi
    ip -n "$H" link set lo up
    ip -n "$H" link add br0 type bridge && ip -n "$H" link set br0 up &&
        ip -n "$H" addr add 10.203.0.1/24 dev br0 || fail "bridge"
    HV_LISTEN=0.0.0.0:7000 write_config "$TMP/head.yaml" "allow_insecure: true" "elastic:" \
        "  rendezvous_timeout_s: 10" "  blacklist_cooldown_s: 60"
    export HV_INSECURE=1
    HEAD=10.203.0.1:7000
    start_head() {
        local n; n=$(grep -c 'listening on' "$TMP/head.out" 2>/dev/null || true)
        ip netns exec "$H" "$BIN/hvhead" start --config "$TMP/head.yaml" >>"$TMP/head.out" 2>>"$TMP/head.err" &
        HEAD_PID=$!
        PIDS="$PIDS $HEAD_PID"
        wait_for 10 sh -c "[ \$(grep -c 'listening on' '$TMP/head.out') -gt ${n:-0} ]" \
            || fail "hvhead did not start in its namespace"
    }
    start_head
    # start_agent NAME SLOTS: in a namespace of its own (c7 -> ${P}7, 10.203.0.8).
    start_agent() {
        local i=${1#c} ns
        ns=$P$i
        ip netns add "$ns" && ip -n "$ns" link set lo up || fail "namespace $ns"
        ip link add "${ns}x" type veth peer name "${ns}y" || fail "veth"
        ip link set "${ns}x" netns "$ns"; ip link set "${ns}y" netns "$H"
        ip -n "$H" link set "${ns}y" master br0; ip -n "$H" link set "${ns}y" up
        ip -n "$ns" addr add "10.203.0.$((i + 1))/24" dev "${ns}x"; ip -n "$ns" link set "${ns}x" up
        ip netns exec "$ns" "$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name "$1" --slots "$2" \
            --work-dir "$TMP/agent-$1" >"$TMP/agent-$1.out" 2>"$TMP/agent-$1.err" &
        eval "AGENT_PID_$1=$!"
        PIDS="$PIDS $!"
        wait_for 15 grep -q joined "$TMP/agent-$1.out" || fail "agent $1 did not join across namespaces"
    }
    CTL="ip netns exec $H $BIN/hvctl"
else
    RDZV_S=10 start_elastic_head
    port=${HEAD##*:}
    sed -i "s/^listen: .*/listen: 127.0.0.1:$port/" "$TMP/head.yaml"
    CTL=$BIN/hvctl
fi

# The seeded draws: an LCG in shell arithmetic (the same on every machine). rand N: 0..N-1.
RNG=$(( SEED % 2147483647 ))
[ "$RNG" -gt 0 ] || RNG=1
rand() {
    RNG=$(( (RNG * 1103515245 + 12345) % 2147483648 ))
    R=$(( (RNG / 65536) % $1 ))
}

NODES="" NEXT=1
add_node() {
    local n="c$NEXT"; NEXT=$((NEXT + 1))
    start_agent "$n" 1
    NODES="$NODES $n"
}
for _ in 1 2 3 4; do add_node; done

T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "t=$(elapsed) $*" | tee -a "$TMP/faults.log"; }
echo "chaos seed=$SEED epochs=$EPOCHS train-limit=$LIMIT$([ "$NETNS" = 1 ] && echo ' netns')" | tee "$TMP/faults.log"

# pick_node: a node name from NODES into N.
pick_node() {
    local cnt; cnt=$(echo $NODES | wc -w)
    rand "$cnt"
    N=$(echo $NODES | tr ' ' '\n' | sed -n "$((R + 1))p")
}
node_of_pid() { readlink "/proc/$1/cwd" 2>/dev/null | sed -n "s|^$TMP/agent-\([^/]*\)/jobs/.*|\1|p"; }

fault() {
    rand 100
    local k=$R
    if [ "$k" -lt 30 ]; then
        local ws cnt pid
        ws=$(workers | sort -n)
        cnt=$(echo $ws | wc -w)
        rand 16 # drawn whether or not there is a worker, so the sequence stays the same
        [ "$cnt" -gt 0 ] || { say "fault=kill-worker none-running"; return; }
        pid=$(echo $ws | tr ' ' '\n' | sed -n "$(( R % cnt + 1 ))p")
        say "fault=kill-worker node=$(node_of_pid "$pid") pid=$pid"
        kill -KILL "$pid" 2>/dev/null
    elif [ "$k" -lt 50 ]; then
        pick_node
        local apid ws; apid=$(agent_pid "$N"); ws=$(agent_workers "$N")
        say "fault=kill-agent node=$N pid=$apid workers=$(echo $ws)"
        kill -KILL "$apid" $ws 2>/dev/null
        NODES=$(echo $NODES | tr ' ' '\n' | grep -vx "$N" | tr '\n' ' ')
        sleep 1
        add_node
        say "joined node=c$((NEXT - 1))"
    elif [ "$k" -lt 65 ]; then
        pick_node
        say "fault=drain node=$N"
        $CTL --head "$HEAD" drain "$N" --reason chaos >/dev/null 2>&1
        sleep 1.5
        $CTL --head "$HEAD" undrain "$N" >/dev/null 2>&1
    elif [ "$k" -lt 75 ]; then
        pick_node; local a=$N
        NODES_ALL=$NODES NODES=$(echo $NODES | tr ' ' '\n' | grep -vx "$a" | tr '\n' ' ')
        pick_node; local b=$N
        NODES=$NODES_ALL
        say "fault=drain-many nodes=$a,$b"
        $CTL --head "$HEAD" drain "$a" "$b" --reason chaos >/dev/null 2>&1
        sleep 1.5
        $CTL --head "$HEAD" undrain "$a" "$b" >/dev/null 2>&1
    elif [ "$NETNS" = 1 ] && [ "$k" -ge 85 ] && [ "$k" -lt 93 ]; then
        pick_node
        local ns=$P${N#c}
        say "fault=link-down node=$N for=3s"
        ip -n "$ns" link set "${ns}x" down
        sleep 3
        ip -n "$ns" link set "${ns}x" up
    elif [ "$k" -lt 85 ]; then
        pick_node
        local apid; apid=$(agent_pid "$N")
        say "fault=stop-agent node=$N pid=$apid for=3.5s"
        kill -STOP "$apid" 2>/dev/null
        sleep 3.5
        kill -CONT "$apid" 2>/dev/null
    else
        say "fault=kill-head pid=$HEAD_PID"
        kill -KILL "$HEAD_PID"
        wait "$HEAD_PID" 2>/dev/null
        sleep 0.5
        start_head
    fi
}

if [ "$NETNS" = 1 ]; then
    # shellcheck disable=SC2086
    ip netns exec "$H" "$BIN/hvsubmit" --head "$HEAD" -np 4 --min-np 1 --max-np 4 --max-resets 1000 \
        --elastic-timeout 60 --blacklist-cooldown 1:2 "$TRAIN" $TRAIN_ARGS --epochs "$EPOCHS" \
        --train-limit "$LIMIT" --step-delay-ms "$STEP_MS" --epoch-log "$TMP/run.epochs" \
        --step-log "$TMP/run.steps" >"$TMP/run.out" 2>"$TMP/run.err" &
    SUB_PID=$!
    PIDS="$PIDS $SUB_PID"
else
    submit run -np 4 --min-np 1 --max-np 4 --max-resets 1000 --elastic-timeout 60 \
        --blacklist-cooldown 1:2 -- --epochs "$EPOCHS" --train-limit "$LIMIT" \
        --step-delay-ms "$STEP_MS" --epoch-log "$TMP/run.epochs" --step-log "$TMP/run.steps"
fi
# The end fault's step: one of the last 6 of the last epoch (64 samples a step), drawn first.
STEPS=$(( (LIMIT + 63) / 64 ))
rand 6
END_STEP=$(( STEPS - 1 - R ))
END_DONE=0
# near_end: rank 0 started step END_STEP (or later) of the last epoch.
near_end() {
    tail -n 1 "$TMP/run.steps" 2>/dev/null | awk -v e=$((EPOCHS - 1)) -v b="$END_STEP" \
        '{ ok = $1 == e && $2 >= b } END { exit !ok }'
}
# pause MS: sleeps MS ms, or less to fire the end fault when its step comes.
pause() {
    local left=$1
    while [ "$left" -gt 0 ]; do
        if [ "$END_DONE" -eq 0 ] && near_end; then
            END_DONE=1
            say "end-of-training step=$((EPOCHS - 1)):$END_STEP"
            fault
        fi
        sleep 0.05; left=$((left - 50))
    done
}
# Faults start once the job runs (its first epoch is on its way) and stop when hvsubmit ends.
wait_for 60 workers_at_least "" 1 || fail "seed $SEED: no worker started"
while kill -0 "$SUB_PID" 2>/dev/null; do
    rand 2001
    pause $((2000 + R))
    kill -0 "$SUB_PID" 2>/dev/null || break
    fault
done
wait_submit 300
say "end hvsubmit rc=$SUB_RC"

why() {
    echo "chaos seed=$SEED FAILED: $*" >&2
    echo "replay: sh tests/chaos/chaos.sh --seed $SEED --epochs $EPOCHS --train-limit $LIMIT" >&2
    cat "$TMP/faults.log" >&2
    $CTL --head "$HEAD" job 1 >&2 2>&1 || true
    fail "$*"
}
[ "$SUB_RC" -eq 0 ] || why "hvsubmit exited $SUB_RC: $(grep 'hvsubmit: job 1 failed' "$TMP/run.err" | head -n 1)"
n=$(epoch_lines run | wc -l)
[ "$n" -eq "$EPOCHS" ] || why "expected $EPOCHS epoch lines, got $n"
(check_exact run "$EPOCHS") || why "the epochs were not exact"
acc=$(epoch_lines run | tail -n 1 | sed -n 's/.* accuracy=\([0-9.]*\).*/\1/p')
awk -v a="${acc:-0}" -v f="$FLOOR" 'BEGIN { exit !(a >= f) }' \
    || why "accuracy $acc is under the floor $FLOOR"
pass "chaos seed=$SEED: $(grep -c ' fault=' "$TMP/faults.log") faults in $(elapsed) s, $EPOCHS exact epochs, accuracy $acc"
