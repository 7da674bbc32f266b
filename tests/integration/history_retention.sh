#!/bin/sh
# History outlives the nodes, within its retention (docs/operations.md "History"): job 1 runs on
# node-a, whose agent is then stopped and its credential revoked; hvctl job 1 and hvctl logs 1
# still answer from the head's state and log file. Jobs 2 and 3 run on node-b. With
# history.max_jobs 2 the head, restarted, prunes job 1 (the oldest finished one) at start: its
# rows, its events and its log file go, one history.prune event says so; jobs 2 and 3 stay
# whole, and job ids are not handed out again. Job 1's program (a script only it used) is
# removed from <data>/artifacts with it (history.artifact_grace_s 3 has passed); the program of
# the kept jobs 2 and 3 stays.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
PORT=$(free_port)
HV_LISTEN=127.0.0.1:$PORT write_config "$TMP/head.yaml" "history:" "  max_jobs: 2" "  prune_interval_s: 1" \
    "  artifact_grace_s: 3"
# Job 1's own program: seq with a byte appended (it still runs), which no other job uploads.
cp /usr/bin/seq "$TMP/seq1"
printf 'x' >>"$TMP/seq1"
ART1=$TMP/data/artifacts/$(sha256sum "$TMP/seq1" | cut -d' ' -f1)
ART2=$TMP/data/artifacts/$(sha256sum /usr/bin/seq | cut -d' ' -f1)
start_head
start_agent node-a 1
"$BIN/hvsubmit" -np 1 "$TMP/seq1" 1 7 >"$TMP/j1.out" 2>"$TMP/j1.err" || fail "job 1 exited $?"
[ -f "$ART1" ] || fail "job 1's program must be stored at $ART1"
"$BIN/hvctl" --head "$HEAD" logs 1 >"$TMP/logs1.before" || fail "hvctl logs 1"
"$BIN/hvctl" --head "$HEAD" events --job 1 >"$TMP/ev1.before" || fail "hvctl events --job 1"
[ "$(grep -c 'job\.' "$TMP/ev1.before")" -ge 2 ] || fail "job 1 should have events"

# node-a goes away for good: its agent stops, its credential is revoked, its lease runs out.
APID=$(agent_pid node-a)
kill -TERM "$APID"
wait_for $((10 * T_MULT)) sh -c "! kill -0 $APID 2>/dev/null" || fail "node-a's agent did not stop"
"$BIN/hvctl" --head "$HEAD" node revoke node-a >"$TMP/revoke.out" 2>&1 || true
# Dead, or no longer listed at all: either way no agent can serve its logs.
wait_for $((15 * T_MULT)) sh -c "! '$BIN/hvctl' --head '$HEAD' nodes | grep node-a | grep -q -e alive -e draining" ||
    fail "node-a should be gone"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job1.gone" 2>&1 || fail "hvctl job 1 must answer after its node is gone"
assert_grep "$TMP/job1.gone" "succeeded"
"$BIN/hvctl" --head "$HEAD" logs 1 >"$TMP/logs1.gone" || fail "hvctl logs 1 must answer after its node is gone"
cmp -s "$TMP/logs1.before" "$TMP/logs1.gone" || fail "job 1's logs changed after its node went"
[ "$(wc -l <"$TMP/logs1.gone")" -eq 7 ] || fail "job 1 printed 7 lines"

start_agent node-b 1
for j in 2 3; do
    "$BIN/hvsubmit" -np 1 /usr/bin/seq 1 $j >"$TMP/j$j.out" 2>"$TMP/j$j.err" || fail "job $j exited $?"
done
LOG1=$(ls "$TMP"/data/logs/*-1.log) || fail "job 1 has no log file"
[ -f "$ART1" ] || fail "job 1's program must stay while job 1 is kept"
[ -f "$ART2" ] || fail "the program of jobs 2 and 3 must be stored at $ART2"

# A restart prunes at once (the finished jobs are no longer held in memory).
kill -TERM "$HEAD_PID"
wait_for 10 sh -c "! kill -0 $HEAD_PID 2>/dev/null" || fail "the head did not stop"
start_head
wait_for 5 grep -q HV-HISTORY-PRUNE "$TMP/head.err" || fail "the head did not prune at start"
assert_grep "$TMP/head.err" "pruned 1 finished job(s) and 1 log file(s) beyond the retention (history.max_age_days 0, history.max_jobs 2)"
if "$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job1.pruned" 2>&1; then fail "job 1 is beyond the retention: it must be gone"; fi
[ ! -e "$LOG1" ] || fail "job 1's log file must be removed with it"
wait_for 5 sh -c "[ ! -e '$ART1' ]" || fail "job 1's program ($ART1), which no kept job uses, must be removed"
[ -f "$ART2" ] || fail "the program of the kept jobs 2 and 3 must stay"
assert_grep "$TMP/head.err" "removed 1 artifact(s) .* that no kept job uses"
"$BIN/hvctl" --head "$HEAD" events --job 1 >"$TMP/ev1" 2>&1
[ "$(grep -c 'job\.' "$TMP/ev1")" -eq 0 ] || fail "job 1's events must be gone"
"$BIN/hvctl" --head "$HEAD" events >"$TMP/events.all" || fail "hvctl events"
assert_grep "$TMP/events.all" "history.prune" "the prune must be in the event log"
for j in 2 3; do
    "$BIN/hvctl" --head "$HEAD" job $j >"$TMP/job$j.kept" 2>&1 || fail "job $j is within the retention: it must stay"
    "$BIN/hvctl" --head "$HEAD" logs $j >"$TMP/logs$j.kept" || fail "hvctl logs $j"
    [ "$(wc -l <"$TMP/logs$j.kept")" -eq $j ] || fail "job $j's logs must stay whole"
done
"$BIN/hvsubmit" -np 1 /usr/bin/seq 1 1 >"$TMP/j4.out" 2>"$TMP/j4.err" || fail "job 4 exited $?"
assert_grep "$TMP/j4.err" "job 4" "a new job must get a new id (4), not a pruned one"
[ -f "$ART2" ] || fail "the program of the kept jobs must stay"
pass "logs and job of a gone node answer; the retention prunes the oldest finished job, rows, events, log and the program only it used"
