#!/bin/sh
# The head is SIGKILLed in the middle of a resume. A one-worker job loses its only node after
# the head stored a copy of its state; the head decides to resume it (stored first: the job's
# resume round and the copy's row are in sqlite) but there is no free node yet, so the round
# waits. The head is killed and restarted there; then a node joins. The restarted head finishes
# the resume from what it stored: the new worker loads the copy, the job ends 0 with exact
# epochs, and there was exactly one resume, closed after the restart.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
LEASE_MS=2000
elastic_cluster 1 "node-a"
pin_head_port

# Copies at least every second even where they cost more (a sanitizer build: the default keeps
# them 80 times their cost apart, which can outlast an epoch there).
submit r -np 1 --min-np 1 --max-np 1 --env HV_STATE_COPY_FACTOR=2 -- --epochs 2 --step-delay-ms 20 --epoch-log "$TMP/r.epochs"
wait_epoch r 0
# Past commit 70 the copy holds epoch 0's end (63 steps an epoch, each a commit).
wait_for 30 copy_past 70 || fail "the head has no copy of the state past epoch 0"
kill -KILL $(agent_pid node-a) $(agent_workers node-a)
wait_for 20 grep -q "resume: every member was lost" "$TMP/r.err" || fail "the head did not decide to resume"
restart_head 0.5
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-mid.txt"
assert_grep "$TMP/job-mid.txt" "STATE:      running" "the restarted head must keep the job running"
assert_grep "$TMP/job-mid.txt" "ROUND:      open (opened for: resume: every member was lost" "the restarted head must keep the resume round open"
start_agent node-b 1
wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/r.err" >&2; fail "a resume interrupted by a head SIGKILL must complete (rc $SUB_RC)"; }
check_exact r 2
"$BIN/hvctl" --head "$HEAD" events --json --limit 1000 >"$TMP/all-events.json"
/usr/bin/python3 - "$TMP/all-events.json" <<'PY' || fail "the resume did not finish after the restart"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
res = [e for e in evs if e["kind"] == "job.resume" and e["job_id"] == 1]
assert len(res) == 1, [e["message"] for e in evs]
g = res[0]["data"]["generation"]
close = [e for e in evs if e["kind"] == "round.close" and e["job_id"] == 1 and e["data"]["generation"] == g]
assert len(close) == 1 and close[0]["data"]["rank0"] == "node-b", close
starts = [e["seq"] for e in evs if e["kind"] == "head.start"]
assert any(res[0]["seq"] < s < close[0]["seq"] for s in starts), (res[0]["seq"], close[0]["seq"], starts)
PY
pass "a resume interrupted by a head SIGKILL completes from what the head stored"
