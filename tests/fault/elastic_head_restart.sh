#!/bin/sh
# The head is SIGKILLed in the middle of elastic training and restarted on the same address:
#  1. between rounds: training does not stop (the workers keep their ring; their pushes and
#     Done calls reconnect), and the job ends 0 with exact epochs;
#  2. in the middle of a round: a node is drained and the head is killed while the round that
#     drain opened waits for the members' next check; after the restart the round is loaded
#     from sqlite, the members re-join it (the drained ones are told to leave), it closes, and
#     the job ends 0 with exact epochs.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
LEASE_MS=6000
elastic_cluster 2 "node-a node-b"
pin_head_port

submit one -np 4 --min-np 2 --max-np 4 -- --epochs 3 --step-delay-ms 20
wait_epoch one 0
restart_head 1
ran_exact one 3 180 "training must go on across a head restart"
rounds 1 >"$TMP/r1"; cat "$TMP/r1"
[ "$(wc -l <"$TMP/r1")" -eq 1 ] || fail "a head restart alone must not change the membership"

# A drain round stays open until the members reach their next membership check (every 50
# commits here, about a second): the head dies inside it.
submit two -np 4 --min-np 2 --max-np 4 --check-every 50 -- --epochs 3 --step-delay-ms 20
wait_epoch two 0
"$BIN/hvctl" --head "$HEAD" drain node-b --reason "test drain" >/dev/null || fail "drain"
wait_for 30 grep -q "generation 2 opened" "$TMP/two.err" || fail "the drain round did not open"
restart_head 0.5
ran_exact two 3 180 "a round interrupted by a head restart must complete"
rounds 2 >"$TMP/r2"; cat "$TMP/r2"
sed -n 2p "$TMP/r2" | grep -q '^2 2 - node-a drain: node node-b (test drain)' \
    || fail "g2 should be the workers of node-a after the drain, without rollback"
# The round opened before the restart and closed after it.
"$BIN/hvctl" --head "$HEAD" events --json --limit 1000 >"$TMP/all-events.json"
/usr/bin/python3 - "$TMP/all-events.json" <<'PY' || fail "the round was not interrupted by the restart"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
seq = lambda pred: [e["seq"] for e in ev if pred(e)]
opened = seq(lambda e: e["job_id"] == 2 and e["kind"] == "round.open" and e["data"]["generation"] == 2)
closed = seq(lambda e: e["job_id"] == 2 and e["kind"] == "round.close" and e["data"]["generation"] == 2)
starts = seq(lambda e: e["kind"] == "head.start")
assert opened and closed, (opened, closed)
assert any(opened[0] < s < closed[0] for s in starts), (opened, closed, starts)
PY
pass "elastic training survives head SIGKILLs, in the middle of a round too"
