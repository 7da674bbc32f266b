#!/bin/sh
# Issue 15's seed 766, on three one-slot nodes and no autoscaler: a 2-worker job runs on
# node-a and node-b. node-b vanishes without notice (agent and worker SIGKILLed); while the
# rollback round that follows is open, node-a gets a preemption notice (SIGTERM to its agent,
# 30 s to go). node-b is suspected at once from its closed session, so node-a's member does not
# leave the training state to it: it stays, the round forms with it after the grace, the job
# grows onto the spare node-c, and node-a's member leaves only once a round with node-c has
# formed. The job ends 0 and every epoch processes each sample exactly once. (Before, node-a's
# member left at once, the round waited for node-b's lease, and the job failed: "no worker of
# generation 1 survived to hold the training state".)
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=10000
# A 2 s grace leaves time to serve the notice while the rollback round is open.
start_elastic_head "suspect_grace_ms: 2000"
start_agent node-a 1 --drain-deadline 30
start_agent node-b 1
submit_logged nv -np 2 --min-np 1 --max-np 2 -- --epochs 3 --step-delay-ms 20
start_agent node-c 1
kill_node node-b 2
# the rollback round opens when node-a's worker finds its ring broken
wait_for 10 grep -q "generation 2 opened (roll back)" "$TMP/nv.err" || fail "no rollback round after the kill"
kill -TERM "$(agent_pid node-a)"
ran_exact nv 3 120 "a notice while another node vanishes must not fail the job"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
# g2: the rollback round forms with node-a's member as rank 0 (it holds the state, notice or
# not), and node-c's newcomer if it joined in time
sed -n 2p "$TMP/rounds" | grep -Eq '^2 [12] rollback node-a ' || fail "g2 should roll back with node-a's worker as rank 0"
# then a round with node-c's newcomer, then node-a's member leaves
grep -q ' node-c .*drain: .*leave now that others hold the state' "$TMP/rounds" ||
    fail "node-a's member should leave only after node-c holds the state"
assert_grep "$TMP/nv.err" "keeps its 1 workers on draining node node-a until workers elsewhere hold"
assert_no_grep "$TMP/nv.err" "survived to hold the training state"
pass "a noticed member stays while the other node vanished; the job completes exactly"
