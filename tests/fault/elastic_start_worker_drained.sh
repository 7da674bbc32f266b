#!/bin/sh
# Issue 15 (bench_spot at one notice every 20 s, seed 4): an elastic job placed at --min-np
# (-np 2 --min-np 1 on one 1-slot node) has its only worker stopped by a drain of its node
# before that worker joined the job's first round (elastic_train --start-delay-ms holds it before
# its first join). The job is left running with no worker and no round; before, it asked for no
# worker ("growth comes after the first round") and stayed so until cancelled. Now it asks for
# workers again as a pending job does: a node joins, the job places a worker there, forms its
# first round with it and ends 0, every epoch exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
elastic_cluster 1 "node-a"

submit drained -np 2 --min-np 1 --max-np 2 -- --epochs 2 --step-delay-ms 5 --start-delay-ms 5000
wait_for 30 grep -q "job 1 placing 1 worker on node-a" "$TMP/drained.err" ||
    fail "the job should start with 1 worker on node-a (--min-np 1)"
"$BIN/hvctl" --head "$HEAD" drain node-a >/dev/null 2>&1 || fail "hvctl drain node-a failed"
no_worker() { [ -z "$(agent_workers node-a)" ]; }
wait_for 30 no_worker || fail "the drain should stop the worker on node-a"
rounds 1 >"$TMP/r0"
[ ! -s "$TMP/r0" ] || { cat "$TMP/r0"; fail "no round should have formed before the drain (the test raced)"; }
start_agent node-b 1
on_b() { "$BIN/hvctl" --head "$HEAD" job 1 2>/dev/null | grep -q ' node-b '; }
wait_for 30 on_b || { "$BIN/hvctl" --head "$HEAD" job 1 >&2; "$BIN/hvctl" --head "$HEAD" status >&2; fail "the job should place a worker on node-b"; }
wait_submit 90
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/drained.err" >&2; fail "the job should complete on node-b (rc $SUB_RC)"; }
check_exact drained 2
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
sed -n 1p "$TMP/rounds" | grep -q '^1 1 - node-b ' || fail "generation 1 should form with 1 worker on node-b"
pass "a job whose only worker was drained before its first round asks for workers again and completes"
