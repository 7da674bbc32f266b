#!/bin/sh
# The other order of issue 15's seed 766: node-a is drained first (hvctl drain; its member
# leaves once the round without it has formed), and before that round forms the member that
# was to take the state over vanishes (node-b's worker is stopped so that it cannot re-join in
# time, then node-b's agent and worker are SIGKILLed). node-b is suspected at once from its
# closed session; node-a's member, whose JoinRound the head holds, is taken back as the holder
# of the state, the round forms with it (and node-c's newcomer) after the grace, and node-a's
# member leaves only after a round with node-c has formed. The job ends 0, every epoch exact.
# (Before, node-a's member left at once and the job failed when node-b's lease ran out: "no
# worker of generation 1 survived to hold the training state".)
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
LEASE_MS=10000
elastic_cluster 1 "node-a node-b" "suspect_grace_ms: 500"
submit_logged dv -np 2 --min-np 1 --max-np 2 -- --epochs 3 --step-delay-ms 20
start_agent node-c 1
wb=$(agent_workers node-b)
[ "$(echo $wb | wc -w)" -eq 1 ] || fail "expected node-b's worker, got: $wb"
kill -STOP $wb
"$BIN/hvctl" --head "$HEAD" drain node-a >/dev/null || fail "hvctl drain node-a failed"
sleep 0.5
kill -KILL "$(agent_pid node-b)" $wb
ran_exact dv 3 120 "a drain while the taker of the state vanishes must not fail the job"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
assert_grep "$TMP/dv.err" "takes back its 1 workers leaving drained nodes"
sed -n 2p "$TMP/rounds" | grep -Eq '^2 [12] [-a-z]+ node-a ' || fail "g2 should form with node-a's member as rank 0"
grep -q ' node-c .*drain: .*leave now that others hold the state' "$TMP/rounds" ||
    fail "node-a's member should leave only after node-c holds the state"
assert_no_grep "$TMP/dv.err" "survived to hold the training state"
pass "a drained member is taken back when the taker of the state vanishes; the job completes exactly"
