#!/bin/sh
# fleet.policy: fcfs through the real binaries (the comparison mode of tests/perf/bench_fleet.sh
# --real): the head schedules first come, first served as before issue 26. On 4 slots an elastic
# job A (-np 2 --min-np 1 --max-np 4) grows to 4 on the free slots; a fixed job B (-np 2)
# submitted then is not admitted by shrinking A (fleet_give_way's scenario, where the fleet policy
# starts it within 2 s): it waits until A has ended, then runs. Both end 0, A's epochs are exact,
# and no fleet.* decision is made.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
start_elastic_head "fleet:" "  policy: fcfs" "  resize_interval_ms: 1000"
start_agent node-a 2
start_agent node-b 2
submit a -np 2 --min-np 1 --max-np 4 -- --epochs 4 --step-delay-ms 25
A_PID=$SUB_PID
wait_epoch a 0
wait_for 30 round_size_is 1 4 || fail "job A did not grow to 4 workers"
submit b -np 2 -- --epochs 1 --train-limit 2000
B_PID=$SUB_PID
sleep 4
[ "$(job_state 2)" = "pending" ] || fail "job B should wait behind A under fcfs, got '$(job_state 2)'"
SUB_PID=$A_PID; wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/a.err" >&2; fail "job A should succeed, hvsubmit exited $SUB_RC"; }
SUB_PID=$B_PID; wait_submit 60
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/b.err" >&2; fail "job B should succeed, hvsubmit exited $SUB_RC"; }
check_exact a 4
events 1
events 2
grep -q '"kind": "fleet\.' "$TMP/events-1.json" "$TMP/events-2.json" && fail "fcfs made a fleet decision"
/usr/bin/python3 - "$TMP/events-1.json" "$TMP/events-2.json" <<'PY' || fail "job B should start only once A has given its workers back"
import json, sys
a = json.load(open(sys.argv[1]))["events"]
b = json.load(open(sys.argv[2]))["events"]
a_end = max(e["time_ms"] for e in a if e["kind"] == "job.state" and e.get("job_state") == "succeeded")
b_run = min(e["time_ms"] for e in b if e["kind"] == "job.state" and e.get("job_state") == "running")
print("A ended at %d, B running at %d (ms)" % (a_end, b_run))
assert b_run >= a_end - 1000, (a_end, b_run)
PY
pass "fcfs: B waited behind A (no shrink to admit), both ended 0, no fleet decision"
