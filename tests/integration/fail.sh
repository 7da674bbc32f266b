#!/bin/sh
# A worker that exits 3 makes hvsubmit exit non-zero, naming that rank, its node and its status;
# the other workers are killed and the job is recorded as failed with that reason.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
start_agent node-b 2
# fail: exit code 3 on rank 2; the others sleep 30 s unless killed
"$BIN/hvsubmit" -np 4 "$EX/fail" 3 2 30 >"$TMP/submit.out" 2>"$TMP/submit.err"
ec=$?
[ $ec -ne 0 ] || fail "hvsubmit exited 0 for a failing job"
[ $ec -eq 3 ] || fail "hvsubmit exited $ec, want the failing rank's status 3"
assert_grep "$TMP/submit.err" "rank 2 on node-b exited with status 3" "hvsubmit must name rank 2, node-b and status 3"
st=$(job_state 1)
[ "$st" = failed ] || fail "job state '$st', want failed"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job.out" 2>&1 || fail "hvctl job 1 failed"
assert_grep "$TMP/job.out" "rank 2 on node-b exited with status 3" "hvctl job must show the reason"
# no worker survives (the others were killed)
wait_for 10 no_workers || fail "workers still running after the job failed"
pass "failing rank reported, others killed"
