#!/bin/sh
# Cancel leaves no worker process behind: hvctl cancel on a running job kills every worker
# (process groups, including grandchildren), the job ends as cancelled, and hvsubmit --detach
# returns the job id at once.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
start_agent node-b 2
id=$("$BIN/hvsubmit" --detach -np 4 "$EX/sleeper" 60 2>"$TMP/submit.err") || fail "hvsubmit --detach failed"
[ "$id" = 1 ] || fail "--detach printed '$id', want the job id 1"
wait_for 15 workers_at_least 1 4 || fail "4 workers did not start"
wait_for 10 state_is 1 running || fail "job not running"
"$BIN/hvctl" --head "$HEAD" cancel 1 >"$TMP/cancel.out" 2>&1 || fail "hvctl cancel failed"
wait_for 10 no_workers 1 || fail "workers survived the cancel"
st=$(job_state 1)
[ "$st" = cancelled ] || fail "job state '$st', want cancelled"
# hvsubmit attached to a job that gets cancelled by Ctrl-C: exit 130 and nothing left
"$BIN/hvsubmit" -np 2 "$EX/sleeper" 60 >"$TMP/s2.out" 2>"$TMP/s2.err" &
sp=$!
wait_for 15 workers_at_least 2 2 || fail "job 2 did not start"
kill -INT $sp
wait $sp; ec=$?
[ $ec -eq 130 ] || fail "hvsubmit after Ctrl-C exited $ec, want 130"
wait_for 10 no_workers 2 || fail "workers survived Ctrl-C"
[ "$(job_state 2)" = cancelled ] || fail "job 2 not cancelled"
pass "cancel and Ctrl-C leave no worker behind"
