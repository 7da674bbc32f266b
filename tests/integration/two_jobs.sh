#!/bin/sh
# Two jobs run side by side when there are enough slots; a third that needs every slot waits
# for them and then runs; a job that cannot get slots within --timeout fails saying so.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
start_agent node-b 2
"$BIN/hvsubmit" -np 2 "$EX/sleeper" 3 >"$TMP/a.out" 2>"$TMP/a.err" &
pa=$!
"$BIN/hvsubmit" -np 2 "$EX/sleeper" 3 >"$TMP/b.out" 2>"$TMP/b.err" &
pb=$!
wait_for 15 workers_at_least "" 4 || fail "the two jobs did not run side by side"
"$BIN/hvsubmit" -np 4 "$EX/hello" >"$TMP/c.out" 2>"$TMP/c.err" &
pc=$!
# hvsubmit uploads the program first (seconds on a loaded machine): wait for the job to exist.
job_known() { [ -n "$(job_state 3)" ]; }
wait_for 20 job_known || fail "job 3 was never submitted"
st=$(job_state 3)
[ "$st" = pending ] || fail "job 3 is '$st' while the cluster is full, want pending"
"$BIN/hvsubmit" -np 4 --timeout 1 "$EX/hello" >"$TMP/d.out" 2>"$TMP/d.err"; ed=$?
wait $pa || fail "job 1 failed"
wait $pb || fail "job 2 failed"
wait $pc || fail "job 3 failed after waiting"
[ "$(grep -c 'hello from rank' "$TMP/c.out")" -eq 4 ] || fail "job 3 did not print 4 lines"
[ $ed -ne 0 ] || fail "job 4 with --timeout 1 should fail"
assert_grep "$TMP/d.err" "waited" "job 4 must say it waited for slots"
pass "side by side, waiting, and --timeout"
