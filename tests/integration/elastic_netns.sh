#!/bin/sh
# Elastic training across hosts: the head and three agents each in their own network namespace
# (10.202.0.0/24 on a bridge this test creates), workers talking over the veth links. One job
# sees every kind of change: B joins (grow), a worker on B is SIGKILLed (failure: B barred,
# rollback), C joins (grow), A gets the preemption notice (drain). It ends 0 with every epoch
# exact and the rounds as planned. Skipped (exit 77) where ip netns is not permitted.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/netns_lib.sh"
hv_setup
P=hve$$
netns_test_hosts $P 10.202.0 3 # A, B and C at 10.202.0.2, .3 and .4
H=${P}h A=${P}1 B=${P}2 C=${P}3
# Plain text across the namespaces, allowed on purpose (netns.sh covers TLS): the head needs
# allow_insecure, and the agents and CLIs HV_INSECURE=1, to talk plain text beyond loopback.
# Growth as soon as a node joins (resize_interval_ms 0): the fleet policy's default hold of 3 s
# could let an epoch pass before B's workers exist, and the SIGKILL would find none.
HV_LISTEN=0.0.0.0:7000 write_config "$TMP/head.yaml" "allow_insecure: true" "elastic:" "  rendezvous_timeout_s: 20" \
    "fleet:" "  resize_interval_ms: 0"
export HV_INSECURE=1
ip netns exec $H "$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/head.out" 2>"$TMP/head.err" &
PIDS="$PIDS $!"
wait_for 10 grep -q 'listening on' "$TMP/head.out" || fail "head did not start in its namespace"
HEAD=10.202.0.1:7000
join_ns() { # NAME NS
    ip netns exec "$2" "$BIN/hvagent" join $HEAD --token "$TOKEN" --name "$1" --slots 2 \
        --work-dir "$TMP/agent-$1" --drain-deadline 60 >"$TMP/agent-$1.out" 2>"$TMP/agent-$1.err" &
    eval "AGENT_PID_$(echo "$1" | tr -c 'a-zA-Z0-9\n' '_')=$!"
    PIDS="$PIDS $!"
    wait_for 15 grep -q joined "$TMP/agent-$1.out" || fail "agent $1 did not join across namespaces"
}
join_ns node-a $A
# hvsubmit runs in the head's namespace.
ip netns exec $H "$BIN/hvsubmit" --head $HEAD -np 2 --min-np 2 --max-np 4 --max-resets 10 "$TRAIN" $TRAIN_ARGS \
    --epochs 5 --step-delay-ms 15 >"$TMP/run.out" 2>"$TMP/run.err" &
SUB_PID=$!
wait_epoch run 0
join_ns node-b $B
wait_epoch run 1
victim=$(agent_workers node-b | head -n 1)
[ -n "$victim" ] || fail "no worker of the job runs on node-b after it joined"
kill -KILL "$victim"
wait_epoch run 2
join_ns node-c $C
wait_epoch run 3
kill -TERM "$(agent_pid node-a)"
ran_exact run 5 180 "the job should survive grow, failure, grow and drain across namespaces"
ip netns exec $H "$BIN/hvctl" --head $HEAD events --job 1 --json --limit 1000 >"$TMP/events-1.json"
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "unexpected rounds"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
r = [e["data"] for e in ev if e["kind"] == "round.close"]
for d in r:
    print(d["generation"], d["size"], d["rollback"], d["rank0"], d["reason"])
kinds = [("grow" if d["reason"].startswith("grow") else
          "drain" if d["reason"].startswith("drain") else
          "failure" if d["rollback"] else d["reason"]) for d in r]
assert kinds == ["start", "grow", "failure", "grow", "drain"], kinds
assert [d["size"] for d in r] == [2, 4, 2, 4, 2], r
assert r[-1]["rank0"] == "node-c" and not r[-1]["rollback"], r[-1]
PY
pass "grow, failure, grow and drain with every host in its own network namespace"
