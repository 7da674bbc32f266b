#!/bin/sh
# The head is SIGKILLed in the middle of a job and restarted on the same address within the
# lease: agents re-attach, the running workers are not killed (same pids finish the job),
# hvsubmit reconnects and prints every line exactly once, and the job succeeds. Then a second
# restart with no agents at all: the job in flight fails with a stated reason once the lease
# runs out (a job is never left running forever).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
LEASE_MS=8000
start_head
pin_head_port
start_agents 2 node-a node-b
submit_sleepers 4 5
pids_before=$(workers 1 | sort | tr '\n' ' ')
restart_head 1
wait $SUB; ec=$?
[ $ec -eq 0 ] || fail "hvsubmit exited $ec across a head restart, want 0"
for r in 0 1 2 3; do
    [ "$(grep -c "^\[$r\]<stdout>:rank $r started" "$TMP/submit.out")" -eq 1 ] || fail "rank $r 'started' not printed exactly once"
    [ "$(grep -c "^\[$r\]<stdout>:rank $r done" "$TMP/submit.out")" -eq 1 ] || fail "rank $r 'done' not printed exactly once"
done
[ "$(job_state 1)" = succeeded ] || fail "job 1 did not succeed after the restart"
[ -n "$pids_before" ] || fail "no worker pids seen"
# workers were the same processes: the store still holds the pids seen before the restart
"$BIN/hvctl" --head "$HEAD" --json job 1 >"$TMP/job1.json"
for p in $pids_before; do
    grep -q "\"pid\": *$p[,}]" "$TMP/job1.json" || fail "worker pid $p was replaced across the restart"
done
# second part: the head restarts, but the agents are gone for good
"$BIN/hvsubmit" --detach -np 2 "$EX/sleeper" 60 >"$TMP/id2" 2>/dev/null || fail "submit 2 failed"
wait_for 15 workers_at_least 2 2 || fail "job 2 did not start"
kill -KILL "$HEAD_PID" "$(agent_pid node-a)" "$(agent_pid node-b)"
kill -KILL $(workers 2)
start_head
wait_for $(( LEASE_MS / 1000 + 10 )) state_is 2 failed || fail "job 2 stayed '$(job_state 2)'"
"$BIN/hvctl" --head "$HEAD" job 2 >"$TMP/job2.out" 2>&1
assert_grep "$TMP/job2.out" "no heartbeat" "job 2's reason must say the node stopped heartbeating"
pass "head SIGKILL + restart keeps the job; lost nodes fail it with a reason"
