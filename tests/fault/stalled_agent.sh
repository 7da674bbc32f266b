#!/bin/sh
# An agent that stalls (SIGSTOP: a frozen VM) is declared dead after the lease and its job fails;
# when it wakes up it re-attaches, the node is alive again, and the head has its now-unwanted
# workers killed.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
LEASE_MS=2000
start_head
start_agents 1 node-a node-b
"$BIN/hvsubmit" -np 2 "$EX/sleeper" 60 >"$TMP/s.out" 2>"$TMP/s.err" &
sub=$!
wait_for 15 workers_at_least 1 2 || fail "workers did not start"
kill -STOP "$(agent_pid node-b)"
wait $sub; ec=$?
[ $ec -ne 0 ] || fail "the job succeeded with a frozen node"
assert_grep "$TMP/s.err" "node-b"
assert_grep "$TMP/s.err" "no heartbeat"
kill -CONT "$(agent_pid node-b)"
wait_for 10 sh -c "'$BIN/hvctl' --head '$HEAD' --json nodes | tr -d '\n ' | grep -q '\"name\":\"node-b\",\"state\":\"alive\"'" || fail "node-b did not come back alive"
wait_for 10 no_workers || fail "the woken agent's workers were not killed"
pass "stalled agent: dead after the lease, re-attached when it woke"
