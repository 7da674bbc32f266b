#!/bin/sh
# An elastic job starts once --min-np slots are free, with what fits up to -np, and grows as
# slots come (Elastic Horovod's start rule): -np 3 --min-np 1 --max-np 3 on one 1-slot node
# places 1 worker and forms generation 1 with it; two more 1-slot nodes join and the job grows
# to 3 (a round without rollback); every epoch is exact and hvsubmit ends 0. Before, it stayed
# pending "waiting for 3 free slots" until all 3 were free (issue 15 §5).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
elastic_cluster 1 "node-a"
submit run -np 3 --min-np 1 --max-np 3 -- --epochs 4 --step-delay-ms 40
wait_for 30 grep -q "job 1 placing 1 worker" "$TMP/run.err" ||
    fail "the job should start with 1 worker on the 1 free slot (--min-np 1)"
wait_epoch run 0 90
rounds 1 >"$TMP/r0"; cat "$TMP/r0"
sed -n 1p "$TMP/r0" | grep -q '^1 1 - node-a ' || fail "generation 1 should have 1 worker, on node-a"
start_agent node-b 1
start_agent node-c 1
wait_submit 120
[ "$SUB_RC" -eq 0 ] || fail "the job should succeed, hvsubmit exited $SUB_RC"
assert_grep "$TMP/run.err" "job 1 submitted (3 workers, elastic: 1 to 3)"
check_exact run 4
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
grep -q '^[0-9]* 3 - .* grow:' "$TMP/rounds" || fail "the job should grow to 3 workers, without rollback"
pass "an elastic job starts with --min-np free slots and grows to -np"
