#!/bin/sh
# Issue 26's scenario through the real binaries: a head with two agents of 2 slots; job A
# (-np 2 --min-np 1 --max-np 4) grows to 4; job B (-np 2, one short epoch) is submitted. The
# fleet policy admits B by shrinking A at its next commit (make before break: a round "shrink:"
# of 2 with no rollback, A's two leaving workers end as worker.left, not failures), B runs within
# 2 s of its submit, and A grows back to 4 once B has ended (after fleet.resize_interval_ms). Both
# end 0 with every epoch exact; each decision is an event with its reason as data and is stored
# with the job (`hvctl job` after the head restarts is another test's: here the events).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
start_elastic_head "fleet:" "  resize_interval_ms: 1000"
start_agent node-a 2
start_agent node-b 2
submit a -np 2 --min-np 1 --max-np 4 -- --epochs 6 --step-delay-ms 25
A_PID=$SUB_PID
wait_epoch a 0
# A grows to 4 on the free slots (a round of 4, no rollback).
wait_for 30 round_size_is 1 4 || fail "job A did not grow to 4 workers"
submit b -np 2 -- --epochs 1 --train-limit 6000
B_PID=$SUB_PID
wait_for 30 state_is 2 running || fail "job B did not start"
SUB_PID=$B_PID; wait_submit 60
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/b.err" >&2; fail "job B should succeed, hvsubmit exited $SUB_RC"; }
SUB_PID=$A_PID; wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/a.err" >&2; fail "job A should succeed, hvsubmit exited $SUB_RC"; }
check_exact a 6
check_exact b 1
events 2
# B ran within 2 s of its submission (the head's own times: submitted, then running).
/usr/bin/python3 - "$TMP/events-2.json" "$T_MULT" <<'PY' || fail "job B did not run within 2 s of its submit"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
st = [e for e in evs if e["kind"] == "job.state"]
sub = [e["time_ms"] for e in st if e.get("job_state") == "pending"]
run = [e["time_ms"] for e in st if e.get("job_state") == "running"]
assert sub and run, st
wait = run[0] - sub[0]
print("job B: running %d ms after its submission" % wait)
assert wait <= 2000 * int(sys.argv[2]), wait
adm = [e for e in evs if e["kind"] == "fleet.admit"]
assert len(adm) == 1 and adm[0]["data"]["reason"] == "admitted" and adm[0]["data"]["to"] == 2, adm
PY
rounds 1 >"$TMP/rounds"
cat "$TMP/rounds"
# A: start (1 or 2), grow to 4, shrink to 2 for job 2, grow back to 4: no round rolls back.
grep -q rollback "$TMP/rounds" && fail "a reset of job A rolled back"
awk '$5 == "shrink:" && $2 == 2' "$TMP/rounds" | grep -q . || fail "job A should shrink to 2 in a round without rollback"
SHRINK_GEN=$(awk '$5 == "shrink:" { print $1; exit }' "$TMP/rounds")
awk -v g="$SHRINK_GEN" '$1 > g && $2 == 4' "$TMP/rounds" | grep -q . || fail "job A should grow back to 4 after the shrink"
grep -q '"kind": "worker.fail"' "$TMP/events-1.json" && fail "a worker given away counted as a failure"
[ "$(grep -c '"kind": "worker.left"' "$TMP/events-1.json")" -ge 2 ] || fail "two workers of A should have left"
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "job A's fleet events lack their reasons"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
sh = [e for e in evs if e["kind"] == "fleet.shrink"]
gr = [e for e in evs if e["kind"] == "fleet.grow"]
assert len(sh) == 1, sh
d = sh[0]["data"]
assert d["reason"] == "shrunk_admit" and d["cause"] == 2 and d["from"] == 4 and d["to"] == 2, d
assert sh[0]["reason"] == "shrink", sh[0]
assert gr and gr[-1]["data"]["to"] == 4 and gr[-1]["time_ms"] > sh[0]["time_ms"], gr
PY
pass "B admitted at once by shrinking A without rollback, A grown back, both exact"
