#!/bin/sh
# An elastic job starts at -np, as hvsubmit announces it, and grows from there: -np 2 --min-np 1
# --max-np 4 on four free slots places 2 workers, forms generation 1 with them, then grows to 4
# on the free slots (a round without rollback). Before, it said "2 workers" and placed 4.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
elastic_cluster 2 "node-a node-b"
submit run -np 2 --min-np 1 --max-np 4 -- --epochs 2 --step-delay-ms 15
wait_submit
[ "$SUB_RC" -eq 0 ] || fail "the job should succeed, hvsubmit exited $SUB_RC"
assert_grep "$TMP/run.err" "job 1 submitted (2 workers, elastic: 1 to 4)"
assert_grep "$TMP/run.err" "job 1 placing 2 workers" "the job must start with -np 2 workers"
check_exact run 2
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
sed -n 1p "$TMP/rounds" | grep -q '^1 2 - ' || fail "generation 1 should have the -np 2 workers"
sed -n 2p "$TMP/rounds" | grep -q '^2 4 - .* grow:' || fail "the job should then grow to 4, without rollback"
pass "an elastic job starts at -np and grows from there"
