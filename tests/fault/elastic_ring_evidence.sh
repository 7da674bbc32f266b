#!/bin/sh
# A frozen node found from the survivors' ring evidence. node-b's agent and its worker are
# SIGSTOPped mid-epoch: node-b's session to the head stays open and silent, so neither the
# closed-session evidence nor the lease (20 s here) can act soon. node-a's worker finds its ring
# neighbour stalled (HV_PEER_TIMEOUT_MS=1000), rolls back and re-joins naming that neighbour as
# broken; that neighbour was node-b's only worker, all its ring neighbours have spoken and none
# of node-b's workers re-joined, so the head suspects node-b at once (a node.suspect event that
# names the ring evidence; `hvctl nodes` shows it) and the round forms without it after the
# 500 ms grace: seconds after the freeze, not the 20 s lease. node-b is then resumed within its
# lease: it is heard again under its name, never dead, its stale worker (left out of the job) is
# stopped, and the job ends 0 with every epoch exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
LEASE_MS=20000
RDZV_S=30
elastic_cluster 1 "node-a node-b" "suspect_grace_ms: 500"
submit ring -np 2 --min-np 1 --max-np 2 --env HV_PEER_TIMEOUT_MS=1000 -- --epochs 3 \
    --step-delay-ms 20 --epoch-log "$TMP/ring.epochs"
ab=$(agent_pid node-b)
# node-b's worker is its agent's child (found before epoch 0 ends: scanning /proc is slow here).
wait_for 60 sh -c "ps -o pid= --ppid $ab | grep -q ." || fail "node-b's worker did not start"
wb=$(ps -o pid= --ppid "$ab" | tr -d ' ')
[ "$(echo $wb | wc -w)" -eq 1 ] || fail "expected node-b's worker, got: $wb"
wait_epoch_logged ring 0
t_freeze=$(date +%s%3N)
kill -STOP "$ab" $wb
# The round without node-b: a few seconds (1 s peer timeout, 500 ms grace), far under the lease.
wait_for 6 grep -q "generation 2: " "$TMP/ring.err" ||
    fail "no round formed without frozen node-b within $((6 * T_MULT)) s (its lease is 20 s)"
t_round=$(date +%s%3N)
limit=$((6000 * T_MULT)); [ "$limit" -gt 12000 ] && limit=12000
[ $((t_round - t_freeze)) -le "$limit" ] ||
    fail "the round without node-b formed $((t_round - t_freeze)) ms after the freeze (limit ${limit} ms, lease 20 s)"
assert_grep "$TMP/head.err" "node node-b is suspected lost: the ring neighbours of worker" \
    "node-b was not suspected from its ring neighbours' reports"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.frozen"; cat "$TMP/nodes.frozen"
grep "^node-b " "$TMP/nodes.frozen" | grep -q "alive (suspected" ||
    fail "hvctl nodes should show node-b as suspected while it is frozen"
"$BIN/hvctl" --head "$HEAD" nodes --json >"$TMP/nodes.json"
/usr/bin/python3 - "$TMP/nodes.json" <<'PY' || fail "hvctl nodes --json should say node-b is suspected"
import json, sys
n = [x for x in json.load(open(sys.argv[1]))["nodes"] if x["name"] == "node-b"][0]
assert n["suspected"] is True and n["suspected_ms"] > 0 and n["state"] == "alive", n
PY
kill -CONT "$ab" $wb
wait_for 10 grep -q "node node-b is heard again within its lease" "$TMP/head.err" ||
    fail "node-b's agent was not heard again after it was resumed"
wait_for 10 sh -c "! kill -0 $wb 2>/dev/null" ||
    fail "node-b's stale worker $wb (left out of the job) was not stopped after it was resumed"
ran_exact ring 3 120 "the job should end 0"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
"$BIN/hvctl" --head "$HEAD" events --json --limit 1000 >"$TMP/events-all.json"
/usr/bin/python3 - "$TMP/events-1.json" "$TMP/events-all.json" "$t_freeze" <<'PY' ||
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
t = int(sys.argv[3])
c = [e for e in evs if e["kind"] == "round.close" and e["time_ms"] >= t][0]
d = c["data"]
print("first round after the freeze: %d ms later, size %d, rollback %s, suspected left out %s"
      % (c["time_ms"] - t, d["size"], d["rollback"], d.get("suspected_left_out")))
assert d["size"] == 1 and d["rollback"] and d.get("suspected_left_out") == 1, d
sus = [e for e in json.load(open(sys.argv[2]))["events"] if e["kind"] == "node.suspect"]
assert sus, "no node.suspect event"
s = sus[0]
print("node.suspect %d ms after the freeze: %s" % (s["time_ms"] - t, s["message"]))
assert s["data"]["evidence"] == "ring" and s["data"]["job_id"] == 1, s
PY
    fail "the first round after the freeze should hold node-a's worker alone, node-b's left out on ring evidence"
assert_no_grep "$TMP/head.err" "node node-b is dead"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes"; cat "$TMP/nodes"
awk '$1 == "node-b" && $3 == "alive"' "$TMP/nodes" | grep -q . || fail "node-b should be alive under its name"
pass "a frozen node is suspected from ring evidence; the round formed $((t_round - t_freeze)) ms after the freeze (lease 20 s)"
