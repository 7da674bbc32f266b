#!/bin/sh
# A node vanishes without notice (its agent and its workers are SIGKILLed) while the lease is
# long (10 s). Its agent's session closes at once, so the head suspects the node from that
# evidence (or from the survivors' reports of broken ring links, whichever reaches it first);
# the survivors' ring breaks, they roll back and re-join, and the round forms without
# the vanished node's workers after the short grace (suspect_grace_ms, 500 ms here), not after
# the lease; or, when a ring neighbour on this machine sees them end first (the death watch), they
# are ended before any suspicion. The job ends 0 and every epoch processes each sample exactly once.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
LEASE_MS=10000
elastic_cluster 2 "node-a node-b" "suspect_grace_ms: 500"
submit_logged loss -np 4 --min-np 2 --max-np 4 -- --epochs 3 --step-delay-ms 20
kill_node node-b 3
ran_exact loss 3 120 "the loss of a node must not fail an elastic job"
events 1
# The first round that closed after the kill: how long after it, and without whom.
/usr/bin/python3 - "$TMP/events-1.json" "$T_KILL" >"$TMP/close.txt" <<'PY' || fail "no round closed after the kill"
import json, sys
evs, t_kill = json.load(open(sys.argv[1]))["events"], int(sys.argv[2])
sus = [e for e in evs if e["kind"] == "job.note" and "suspected lost" in e["message"]
       and e["time_ms"] >= t_kill]
closes = [e for e in evs if e["kind"] == "round.close" and e["time_ms"] >= t_kill]
assert closes, "no round.close after the kill"
c = closes[0]
print(c["time_ms"] - t_kill, c["data"]["size"], c["data"].get("suspected_left_out", 0),
      c["data"]["rollback"], (sus[0]["time_ms"] - t_kill) if sus else -1)
PY
cat "$TMP/close.txt"
read -r after size left_out rollback suspect_after <"$TMP/close.txt"
# 500 ms of grace, a 200 ms tick, the re-joins: well under the 10 s lease (slower under ASan).
limit=$((3000 * T_MULT)); [ "$limit" -gt 7000 ] && limit=7000
[ "$after" -le "$limit" ] || fail "the round closed ${after} ms after the kill (limit ${limit} ms; the lease is 10 s)"
# node-b's workers are left out as suspected (2), or were ended before the round formed because
# a ring neighbour on this machine saw them end (the death watch: both agents run here; 0).
[ "$size" -eq 2 ] && { [ "$left_out" -eq 2 ] || [ "$left_out" -eq 0 ]; } && [ "$rollback" = True ] ||
    fail "the round should roll back to node-a's 2 workers, without node-b's 2 (size $size, left out $left_out, rollback $rollback)"
if [ "$left_out" -eq 0 ]; then
    # The death watch's path: node-b's workers ended on a same-machine neighbour's word.
    grep -q "on node-b was lost: its process ended" "$TMP/loss.err" ||
        fail "with no worker left out as suspected, node-b's workers must have been seen ended"
else
    [ "$suspect_after" -ge 0 ] && [ "$suspect_after" -le 1000 ] || fail "the head did not suspect node-b at once (${suspect_after} ms after the kill)"
    # The evidence is the agent's closed session, or, when the survivors' JoinRounds reach the
    # head before the closed stream does (a loaded machine), their reports of broken ring links:
    # both come at once after the kill, and either suspects the node (elastic_ring_evidence has
    # the ring alone).
    grep -Eq "node node-b is suspected lost: (its agent's session closed|the ring neighbours of worker [0-9]+ reported broken links)" "$TMP/head.err" ||
        fail "the head did not say why it suspected node-b (its agent's session closed, or broken ring links)"
fi
pass "a vanished node's round forms ${after} ms after the kill (grace 500 ms, lease 10 s)"
