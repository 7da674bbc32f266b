#!/bin/sh
# Two agents with one --name: while the first is live the second is refused (non-zero exit, the
# reason named) and the first's job keeps running; once the first has been silent past its lease
# a newcomer takes the name over with a new incarnation, and the old agent, when it wakes up,
# exits instead of fighting for the name.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
LEASE_MS=2000
start_head
start_agent node-a 1
submit_sleepers 1 60

# A second live agent named node-a: refused, exits non-zero within a bounded time.
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name node-a --slots 1 --work-dir "$TMP/agent-b" \
    >"$TMP/agent-b.out" 2>"$TMP/agent-b.err" &
b=$!
PIDS="$PIDS $b"
wait_for 15 sh -c "! kill -0 $b" || fail "the second agent named node-a kept running"
wait "$b" && fail "the refused agent exited 0"
assert_grep "$TMP/agent-b.err" "node name node-a is in use by a live agent"
sleep $(( 2 * T_MULT )) # several heartbeats: nobody pushes anybody off
kill -0 "$(agent_pid node-a)" || fail "the first agent died"
state_is 1 running || fail "job 1 is $(job_state 1), not running"
"$BIN/hvctl" --head "$HEAD" events >"$TMP/events.out" 2>&1
assert_no_grep "$TMP/events.out" "agent restarted"
assert_no_grep "$TMP/submit.err" "agent restarted"

# The first agent hangs (SIGSTOP) past its lease: a newcomer takes the name over.
a=$(agent_pid node-a)
kill -STOP "$a"
# Until the head has seen the lease pass (was a sleep of 3 x T_MULT s: 9 s under the sanitizers).
wait_for 15 sh -c "'$BIN/hvctl' --head '$HEAD' nodes | grep -q 'node-a.*dead'" \
    || fail "the stopped agent's node should be dead once its lease passed"
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name node-a --slots 1 --work-dir "$TMP/agent-c" \
    >"$TMP/agent-c.out" 2>"$TMP/agent-c.err" &
c=$!
PIDS="$PIDS $c"
wait_for 15 grep -q joined "$TMP/agent-c.out" || fail "the newcomer did not take node-a over: $(cat "$TMP/agent-c.err")"
# The old agent wakes up: it learns the name is taken and exits non-zero.
kill -CONT "$a"
wait_for 20 sh -c "! kill -0 $a 2>/dev/null || grep -q zombie /proc/$a/status 2>/dev/null || \
    [ \"\$(awk '{print \$3}' /proc/$a/stat 2>/dev/null)\" = Z ]" || fail "the old agent did not stop"
assert_grep "$TMP/agent-node-a.err" "in use by a live agent"
kill -0 "$c" || fail "the newcomer died"
"$BIN/hvsubmit" -np 1 "$EX/hello" >"$TMP/s2.out" 2>&1 || fail "a job on the new node-a failed"
assert_grep "$TMP/s2.out" "hello from rank 0 of 1"
pass "a second live agent is refused; after the lease a newcomer takes over"
