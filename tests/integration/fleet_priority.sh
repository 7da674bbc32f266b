#!/bin/sh
# Priorities through the real binaries (issue 26 §2): on 4 slots an elastic job L (-np 4 --min-np 2,
# priority 0) runs at 4; a fixed job W (-np 3, priority 0) cannot start (L gives at most 2) and
# waits; a fixed job H (-np 2 --priority 5), submitted after W, is admitted first by shrinking L to
# its minimum at its next commit (no rollback). `hvctl queue` shows each job's priority, size,
# target and why, highest priority first, and --json the same as fields. W starts once L ends; all
# three end 0 and L's epochs are exact. A priority out of range is refused by hvsubmit.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
start_elastic_head "fleet:" "  resize_interval_ms: 1000"
start_agent node-a 2
start_agent node-b 2
"$BIN/hvsubmit" --head "$HEAD" --priority 5000 -np 1 "$TRAIN" >"$TMP/bad.out" 2>"$TMP/bad.err" \
    && fail "hvsubmit --priority 5000 should be refused"
assert_grep "$TMP/bad.err" "priority '5000': expected a whole number from -1000 to 1000"
submit l -np 4 --min-np 2 --max-np 4 -- --epochs 4 --step-delay-ms 25
L_PID=$SUB_PID
wait_epoch l 0
submit w -np 3 -- --epochs 1
W_PID=$SUB_PID
wait_for 20 sh -c "'$BIN/hvctl' --head '$HEAD' --json queue | grep -q '\"reason\": \"wait_capacity\"'" \
    || fail "job W should wait for capacity"
submit h -np 2 --priority 5 -- --epochs 1 --step-delay-ms 25
H_PID=$SUB_PID
wait_for 30 state_is 3 running || fail "job H did not start"
"$BIN/hvctl" --head "$HEAD" queue >"$TMP/queue.txt"
"$BIN/hvctl" --head "$HEAD" --json queue >"$TMP/queue.json"
cat "$TMP/queue.txt"
[ "$(job_state 2)" = "pending" ] || fail "job W (priority 0, submitted first) should still wait"
sed -n '/^ID /,$p' "$TMP/queue.txt" | sed -n 2p | grep -Eq '^3 +elastic_train +default +running +5 ' \
    || fail "hvctl queue should list job H (priority 5) first"
grep -Eq '^2 .*pending +0 +3 +0 +0 +waiting' "$TMP/queue.txt" || fail "hvctl queue should show W waiting"
/usr/bin/python3 - "$TMP/queue.json" <<'PY' || fail "hvctl --json queue lacks its fields"
import json, sys
q = {j["job_id"]: j for j in json.load(open(sys.argv[1]))["jobs"]}
assert [j for j in q] == [3, 1, 2], list(q)
assert q[3]["priority"] == 5 and q[3]["target"] == 2, q[3]
assert q[2]["state"] == "pending" and q[2]["target"] == 0 and q[2]["reason"].startswith("wait_"), q[2]
assert q[1]["target"] == 2 and q[1]["min_np"] == 2, q[1]
for j in q.values():
    for k in ("priority", "preemptible", "size", "target", "reason", "cause", "why"):
        assert k in j, (k, j)
PY
for p in $H_PID $L_PID $W_PID; do
    SUB_PID=$p; wait_submit 120
    [ "$SUB_RC" -eq 0 ] || fail "every job should succeed (hvsubmit $p exited $SUB_RC)"
done
check_exact l 4
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
grep -q rollback "$TMP/rounds" && fail "a reset of job L rolled back"
awk '$5 == "shrink:" && $2 == 2' "$TMP/rounds" | grep -q . || fail "job L should shrink to its minimum, 2"
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "job L's shrink should name job H"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
sh = [e["data"] for e in evs if e["kind"] == "fleet.shrink"]
assert sh and sh[0]["cause"] == 3 and sh[0]["to"] == 2, sh
assert sh[0]["reason"] in ("shrunk_priority", "shrunk_admit"), sh
PY
pass "a higher priority admitted first, the lower-priority elastic job shrunk to its minimum"
