#!/bin/sh
# Issue 15 (bench_spot at one notice every 20 s, seed 3): an elastic job placed at --min-np
# (-np 2 --min-np 1 on one 1-slot node) loses its only node (agent and worker SIGKILLed) after
# its first round formed but before its first commit. No copy of the training state exists, and
# none is needed: nothing was committed, so no epoch can have finished. The head restarts the job
# from the beginning with new workers instead of failing it ("no copy of the training state was
# stored outside its nodes yet", before): a node joins, the job forms a round there and ends 0,
# every epoch printed once and exact; the events and hvsubmit say that new workers start from
# the beginning. (elastic_train --first-commit-delay-ms holds the first worker before its first
# commit, so the kill lands in that window.)
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
LEASE_MS=2000
elastic_cluster 1 "node-a"

submit early -np 2 --min-np 1 --max-np 2 -- --epochs 2 --step-delay-ms 5 \
    --first-commit-delay-ms 60000 --epoch-log "$TMP/early.epochs"
formed() { rounds 1 2>/dev/null | grep -q '^1 1 - node-a '; }
wait_for 60 formed || fail "generation 1 did not form on node-a"
[ -n "$(agent_workers node-a)" ] || fail "node-a runs no worker of the job"
kill -KILL $(agent_pid node-a) $(agent_workers node-a)
start_agent node-b 1
wait_submit 90
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/early.err" >&2; fail "a job that lost every member before its first commit must start again, not fail (rc $SUB_RC)"; }
check_exact early 2
events 1
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "the events do not show the restart from the beginning"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
res = [e for e in evs if e["kind"] == "job.resume"]
assert len(res) == 1, [e["message"] for e in evs]
assert "every member was lost before the first commit: new workers start from the beginning" in res[0]["message"], res[0]
d = res[0]["data"]
assert d["restart"] is True and d["tier"] == "none", d
assert "node-a" in d["failures"], d
closes = [e["data"] for e in evs if e["kind"] == "round.close"]
assert closes[-1]["generation"] == d["generation"] and closes[-1]["rank0"] == "node-b", closes[-1]
PY
assert_grep "$TMP/early.err" "restart: every member was lost before the first commit (.*node-a.*); new workers start from the beginning" \
    "hvsubmit should say that the job starts again from the beginning"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-after.txt"
assert_grep "$TMP/job-after.txt" "^ROUND: .*restart: every member was lost before the first commit" \
    "hvctl job should say why the last round opened"
pass "a job whose every member is lost before its first commit starts again from the beginning; epochs stay exact"
