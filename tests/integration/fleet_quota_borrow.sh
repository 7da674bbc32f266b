#!/bin/sh
# Quotas and borrowing through the real binaries (issue 26 §2): a head with two namespaces, a and
# b, each with a quota of 2 of the cluster's 4 slots (a's default priority 3). Job A (namespace a,
# -np 2 --min-np 1 --max-np 4, no --priority: a's 3) grows to 4 by borrowing b's idle quota:
# `hvctl --json queue` and `hvctl status` show a using 4 slots, 2 of them borrowed. Job B (namespace b, -np 2,
# priority 0) is submitted: b takes its quota back although A's priority is higher, A shrinks to
# 2 at its next commit (reason shrunk_reclaim, naming B; no rollback) and B runs within one
# resize interval of its submission. Both end 0 with every epoch exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
INTERVAL_MS=2000
start_elastic_head "fleet:" "  resize_interval_ms: $INTERVAL_MS" "  namespaces:" \
    "    - {name: a, quota: {slots: 2}, priority: 3}" \
    "    - {name: b, quota: {slots: 2}}"
start_agent node-a 2
start_agent node-b 2
submit a --namespace a -np 2 --min-np 1 --max-np 4 -- --epochs 6 --step-delay-ms 25
A_PID=$SUB_PID
wait_epoch a 0
wait_for 30 round_size_is 1 4 || fail "job A did not grow to 4 workers by borrowing"
"$BIN/hvctl" --head "$HEAD" --json queue >"$TMP/queue-borrow.json"
"$BIN/hvctl" --head "$HEAD" queue >"$TMP/queue-borrow.txt"
cat "$TMP/queue-borrow.txt"
/usr/bin/python3 - "$TMP/queue-borrow.json" <<'PY' || fail "hvctl --json queue should show a borrowing 2 slots"
import json, sys
q = json.load(open(sys.argv[1]))
ns = {n["name"]: n for n in q["namespaces"]}
assert list(ns) == ["a", "b", "default"], list(ns)
a, b = ns["a"], ns["b"]
assert a["quota"]["slots"] == 2 and a["borrow"]["slots"] is None, a
assert a["used"]["slots"] == 4 and a["borrowed"]["slots"] == 2, a
assert b["used"]["slots"] == 0 and b["borrowed"]["slots"] == 0 and a["priority"] == 3, b
assert a["share_pm"] > b["share_pm"], (a, b)
jobs = q["jobs"]
assert len(jobs) == 1 and jobs[0]["namespace"] == "a" and jobs[0]["target"] == 4, jobs
assert jobs[0]["priority"] == 3, jobs
PY
grep -Eq '^a +1 +2 +unlimited +4 +2 ' "$TMP/queue-borrow.txt" || fail "hvctl queue should show a's quota 2, use 4, borrowed 2"
grep -Eq '^1 +elastic_train +a +running +3 ' "$TMP/queue-borrow.txt" || fail "hvctl queue should show job A's namespace"
# hvctl status sums it up per namespace with the same figures: a borrows 2 beyond its quota.
"$BIN/hvctl" --head "$HEAD" status >"$TMP/status-borrow.txt" || fail "hvctl status failed"
cat "$TMP/status-borrow.txt"
assert_grep "$TMP/status-borrow.txt" '^  namespace a: 1 job, 4 workers, 0 waiting; 4 slots used (quota 2, 2 borrowed), share '
assert_grep "$TMP/status-borrow.txt" '^  namespace b: 0 jobs, 0 workers, 0 waiting; 0 slots used (quota 2, 0 borrowed), share 0.0%$'
submit b --namespace b -np 2 -- --epochs 1 --train-limit 6000
B_PID=$SUB_PID
wait_for 30 state_is 2 running || fail "job B did not start"
"$BIN/hvctl" --head "$HEAD" --json queue >"$TMP/queue-reclaim.json"
SUB_PID=$B_PID; wait_submit 60
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/b.err" >&2; fail "job B should succeed, hvsubmit exited $SUB_RC"; }
SUB_PID=$A_PID; wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/a.err" >&2; fail "job A should succeed, hvsubmit exited $SUB_RC"; }
check_exact a 6
check_exact b 1
/usr/bin/python3 - "$TMP/queue-reclaim.json" <<'PY' || fail "once B runs, b should use its quota and a borrow nothing"
import json, sys
q = json.load(open(sys.argv[1]))
ns = {n["name"]: n for n in q["namespaces"]}
assert ns["a"]["used"]["slots"] == 2 and ns["a"]["borrowed"]["slots"] == 0, ns["a"]
assert ns["b"]["used"]["slots"] == 2 and ns["b"]["borrowed"]["slots"] == 0, ns["b"]
jobs = {j["job_id"]: j for j in q["jobs"]}
assert jobs[2]["namespace"] == "b" and jobs[2]["priority"] == 0 and jobs[2]["target"] == 2, jobs[2]
assert jobs[1]["target"] == 2, jobs[1]
PY
events 1
events 2
/usr/bin/python3 - "$TMP/events-1.json" "$TMP/events-2.json" "$INTERVAL_MS" "$T_MULT" <<'PY' \
    || fail "B should get its slots back from A within one resize interval"
import json, sys
ea = json.load(open(sys.argv[1]))["events"]
eb = json.load(open(sys.argv[2]))["events"]
interval, mult = int(sys.argv[3]), int(sys.argv[4])
st = [e for e in eb if e["kind"] == "job.state"]
sub = [e["time_ms"] for e in st if e.get("job_state") == "pending"]
run = [e["time_ms"] for e in st if e.get("job_state") == "running"]
assert sub and run, st
wait = run[0] - sub[0]
print("job B: running %d ms after its submission (resize interval %d ms)" % (wait, interval))
assert wait <= interval * mult, wait
sh = [e["data"] for e in ea if e["kind"] == "fleet.shrink"]
assert sh and sh[0]["reason"] == "shrunk_reclaim" and sh[0]["cause"] == 2, sh
assert sh[0]["from"] == 4 and sh[0]["to"] == 2, sh
PY
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
grep -q rollback "$TMP/rounds" && fail "a reset of job A rolled back"
awk '$5 == "shrink:" && $2 == 2' "$TMP/rounds" | grep -q . || fail "job A should shrink to 2 (its quota) in a round"
pass "A borrowed b's idle quota, gave it back when B came within one resize interval, both exact"
