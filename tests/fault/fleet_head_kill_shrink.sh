#!/bin/sh
# The head is SIGKILLed in the middle of a shrink the fleet policy decided (issue 26 §5): job A
# (-np 4 --min-np 1, membership checks every 200 commits so that the shrink's round stays open
# about four seconds, longer than a loaded machine takes to see it open and kill the head) gives
# 2 workers to job B; the head dies while A's shrink round waits for A's next check, and is
# restarted on the same address (leases of 10 s: agents under load re-attach within them). The
# decision and the round were stored before anything acted: after the restart A's round closes
# with 2 (no rollback), B starts on the freed slots, and both end 0 with exact epochs.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=10000
start_elastic_head "fleet:" "  resize_interval_ms: 1000"
port=${HEAD##*:}
sed -i "s/^listen: .*/listen: 127.0.0.1:$port/" "$TMP/head.yaml"
start_agent node-a 2
start_agent node-b 2
submit a -np 4 --min-np 1 --max-np 4 --check-every 200 -- --epochs 4 --step-delay-ms 20
A_PID=$SUB_PID
wait_epoch a 0
submit b -np 2 -- --epochs 1
B_PID=$SUB_PID
wait_for 30 grep -q "opened: shrink:" "$TMP/a.err" || fail "job A's shrink round did not open"
kill -KILL "$HEAD_PID"
wait "$HEAD_PID" 2>/dev/null
sleep 1
start_head
for p in $B_PID $A_PID; do
    SUB_PID=$p; wait_submit 180
    [ "$SUB_RC" -eq 0 ] || { tail -5 "$TMP/a.err" "$TMP/b.err" >&2; fail "both jobs must end 0 across the head's kill (hvsubmit $p: $SUB_RC)"; }
done
check_exact a 4
check_exact b 1
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
grep -q rollback "$TMP/rounds" && fail "a reset of job A rolled back"
awk '$5 == "shrink:" && $2 == 2' "$TMP/rounds" | grep -q . || fail "job A's shrink round should close with 2 workers"
"$BIN/hvctl" --head "$HEAD" events --json --limit 1000 >"$TMP/all.json"
/usr/bin/python3 - "$TMP/all.json" <<'PY' || fail "the shrink round should close after the head's restart"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
starts = [e["time_ms"] for e in evs if e["kind"] == "head.start"]
shrink = [e for e in evs if e["kind"] == "round.close" and e["job_id"] == 1
          and e["data"]["reason"].startswith("shrink:")]
assert len(starts) == 2 and shrink, (starts, shrink)
assert shrink[0]["time_ms"] > starts[1], (starts, shrink[0]["time_ms"])
PY
pass "a head SIGKILLed in the middle of a shrink loses no job"
