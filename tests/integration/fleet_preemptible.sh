#!/bin/sh
# Preemptible jobs through the real binaries (issue 26 §2, §5): on 4 slots a low-priority
# elastic job L (-np 4 --min-np 2 --preemptible) runs and the head keeps copies of its state; a
# job H (-np 4 --min-np 4 --max-np 4 --priority 5) needs the whole cluster. L cannot shrink
# enough, so the fleet stops it at its next commit (a round of reason code preempt, pushed as
# MembershipPush.reason_code): its members re-join there, rank 0 first sending a copy of that
# very commit, and the job stops (fleet.preempt, cause 2, at_commit, a new copy): `hvctl
# job`/`hvctl queue` show it pending, "preempted for job 2, waits to resume", and its hvsubmit
# stream stays attached. The head is SIGKILLed and restarted while L waits: it stays preempted
# (stored). H runs and ends 0; then L is admitted again (fleet.resume), its new workers resume
# from the copy made at the stop (a round "resume after a preemption" that loads that commit):
# L ends 0 with every sample exactly once per epoch and no step started twice (rank 0's
# --step-log). The bound: job M checks its membership only every 100000 commits, so no commit
# answers the stop; the head stops it 5 s after the stop began (at_commit false), and M resumes
# from its newest copy and ends exact. A fixed-size job cannot be --preemptible (no copy to
# resume from): hvsubmit says so and exits non-zero.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=10000 # the agents keep their workers while the head restarts (under load)
start_elastic_head "fleet:" "  resize_interval_ms: 1000"
port=${HEAD##*:}
sed -i "s/^listen: .*/listen: 127.0.0.1:$port/" "$TMP/head.yaml"
start_agent node-a 2
start_agent node-b 2
"$BIN/hvsubmit" --head "$HEAD" --preemptible -np 2 "$TRAIN" >"$TMP/bad.out" 2>"$TMP/bad.err" \
    && fail "hvsubmit --preemptible of a fixed-size job should be refused"
assert_grep "$TMP/bad.err" "a fixed-size job cannot be stopped and resumed"
# Copies at least every second even where they cost more (see elastic_resume_head_restart).
submit l -np 4 --min-np 2 --max-np 4 --preemptible --env HV_STATE_COPY_FACTOR=2 -- \
    --epochs 3 --step-delay-ms 30 --epoch-log "$TMP/l.epochs" --step-log "$TMP/l.steps"
L_PID=$SUB_PID
wait_epoch l 0
# Past commit 70 the copy holds epoch 0's end (63 steps an epoch, each a commit): the stop comes
# in epoch 1, at a commit, with a copy of that commit (no step of epoch 1 is redone).
wait_for 30 copy_past 70 || fail "the head has no copy of job L's state past epoch 0"
submit h -np 4 --min-np 4 --max-np 4 --priority 5 -- --epochs 2 --step-delay-ms 20
H_PID=$SUB_PID
wait_for 30 grep -q "preempted for job 2" "$TMP/l.err" || { cat "$TMP/l.err" >&2; fail "job L's stream should say it was preempted"; }
wait_for 20 state_is 1 pending || fail "job L should be pending once preempted"
# The head is SIGKILLed while L waits to resume (and H runs, its round formed): what it stored
# keeps L preempted.
wait_for 30 sh -c "'$BIN/hvctl' --head '$HEAD' events --job 2 --json | grep -q '\"round.close\"'" \
    || fail "job H's round did not form"
kill -KILL "$HEAD_PID"
wait "$HEAD_PID" 2>/dev/null
sleep 0.5
start_head
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-mid.txt" || fail "hvctl job 1 failed"
"$BIN/hvctl" --head "$HEAD" queue >"$TMP/queue.txt" || fail "hvctl queue failed"
cat "$TMP/job-mid.txt" "$TMP/queue.txt"
[ "$(job_state 1)" = "pending" ] || fail "job L should still wait after the head restarted"
assert_grep "$TMP/job-mid.txt" "preempted for job 2, waits to resume" "hvctl job should say why L waits"
assert_grep "$TMP/queue.txt" "preempted for job 2, waits to resume" "hvctl queue should say why L waits"
SUB_PID=$H_PID; wait_submit 90
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/h.err" >&2; fail "job H should succeed, hvsubmit exited $SUB_RC"; }
SUB_PID=$L_PID; wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/l.err" >&2; fail "job L should resume and succeed, hvsubmit exited $SUB_RC"; }
check_exact l 3
check_exact h 2
grep -q "job 1 resumes from its state copy" "$TMP/l.err" || fail "job L's stream should say it resumed"
grep -q "resume after a preemption" "$TMP/l.err" || fail "job L's stream should show its resume round"
events 1
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "job L's preemption and resume events are wrong"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
pre = [e for e in evs if e["kind"] == "fleet.preempt"]
res = [e for e in evs if e["kind"] == "fleet.resume"]
assert len(pre) == 1, [e["message"] for e in evs]
d = pre[0]["data"]
assert d["reason"] == "preempted" and d["cause"] == 2 and d["from"] == 4 and d["to"] == 0, d
assert d["copy_commit"] > 0 and d["resume_gen"] > 0, d
assert len(res) == 1 and res[0]["seq"] > pre[0]["seq"] and res[0]["data"]["reason"] == "admitted", res
# At the commit: every member re-joined there, rank 0's copy of it stored before the stop.
assert d["at_commit"] is True and d["new_copy"] is True and d["waited_ms"] < 5000, d
stop = [e for e in evs if e["kind"] == "round.open" and e["data"]["reason"].startswith("preempt:")]
assert len(stop) == 1 and stop[0]["reason"] == "preempt", stop
close = [e["data"] for e in evs if e["kind"] == "round.close" and e["data"]["generation"] == d["resume_gen"]]
assert len(close) == 1 and close[0]["reason"].startswith(
    "resume after a preemption: new workers load the copy of generation %d, commit %d"
    % (d["copy_generation"], d["copy_commit"])), (close, d)
assert not [e for e in evs if e["kind"] == "worker.fail"], "a stopped worker counted as a failure"
print("stopped at commit %d (copy made there, %d ms after the stop began), resumed in generation %d"
      % (d["copy_commit"], d["waited_ms"], d["resume_gen"]))
PY
steps_once l 3
# The bound (5 s): M's members check their membership every 100000 commits, so no commit answers
# the stop; the head stops M at the bound from its newest copy (the steps since are redone).
# (One epoch of 63 steps of 150 ms: the bound comes mid-epoch.)
submit m -np 4 --min-np 2 --max-np 4 --preemptible --check-every 100000 \
    --env HV_STATE_COPY_FACTOR=2 -- --epochs 1 --step-delay-ms 150 --epoch-log "$TMP/m.epochs"
M_PID=$SUB_PID
wait_for 60 copy_past 3 3 || fail "the head has no copy of job M's state"
submit h2 -np 4 --min-np 4 --max-np 4 --priority 5 -- --epochs 1 --train-limit 1000
wait_for 30 grep -q "preempted for job 4" "$TMP/m.err" || { cat "$TMP/m.err" >&2; fail "job M should be stopped for job 4"; }
assert_grep "$TMP/m.err" "now: no commit came within the bound" "M's stream should say it was stopped at the bound"
ended_ok 90 "job H2 should succeed"
SUB_PID=$M_PID
ran_exact m 1 120 "job M should resume after the bound and succeed"
events 3
/usr/bin/python3 - "$TMP/events-3.json" <<'PY' || fail "job M's stop at the bound is wrong"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
pre = [e["data"] for e in evs if e["kind"] == "fleet.preempt"]
assert len(pre) == 1, pre
d = pre[0]
assert d["cause"] == 4 and d["at_commit"] is False and 4900 <= d["waited_ms"] <= 15000, d
print("stopped at the bound after %d ms, from the copy of commit %d" % (d["waited_ms"], d["copy_commit"]))
PY
pass "a preemptible job stopped for a higher priority, kept across a head kill, resumed exactly"
