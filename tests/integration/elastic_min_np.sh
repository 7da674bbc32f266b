#!/bin/sh
# Below min-np, an elastic job waits for capacity instead of deadlocking (horovod#3494). The
# epochs are short (1200 samples): 12-24 workers share this machine's cores.
#  1. A(8) and B(4); -np 12 --min-np 8 --max-np 12; A is drained: the 4 survivors on B wait in
#     an open round; C(12) joins before the elastic timeout: the job grows onto C, a round of 12
#     forms with rank 0 on B (the oldest survivor), and the job ends 0 with exact epochs.
#  2. The same drain with no capacity anywhere, on a cluster of its own (a new head, A(8) and
#     B(4)): the job fails when --elastic-timeout passes, saying that min-np was not met. A round
#     below min-np fails at the later of --elastic-timeout and the head's rendezvous_timeout_s
#     (docs/internals.md): its head has 8 s, not part 1's 20 (its first round must still form
#     with all 12 workers, asserted below).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
elastic_cluster 8 "node-a"
start_agent node-b 4
TRAIN_ARGS="--train-limit 1200 --test-limit 500 --batch 48"
submit wait -np 12 --min-np 8 --max-np 12 -- --epochs 2 --step-delay-ms 20
wait_epoch wait 0 120
"$BIN/hvctl" --head "$HEAD" drain node-a --reason "preemption notice" >"$TMP/drain.out" || fail "hvctl drain"
assert_grep "$TMP/drain.out" "draining"
# The round waits: 4 workers, below min-np 8.
wait_for 30 sh -c "'$BIN/hvctl' --head '$HEAD' job 1 | grep -q 'ROUND:.*open'" || fail "the round should stay open below min-np"
sleep 1
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-waiting.txt"
assert_grep "$TMP/job-waiting.txt" "running" "the job must wait, not fail"
start_agent node-c 12
wait_submit 180
[ "$SUB_RC" -eq 0 ] || fail "the job should succeed once node-c brings capacity (rc $SUB_RC)"
check_exact wait 2
rounds 1 >"$TMP/r1"; cat "$TMP/r1"
tail -n 1 "$TMP/r1" | grep -q '^[0-9]* 12 - node-b ' || fail "the last round should have 12 workers, rank 0 on node-b"

# No capacity: a new cluster of A(8) and B(4) runs a new job, A is drained: nothing can replace
# it, so the job fails when the elastic timeout passes, saying why.
hv_cleanup
PIDS=""
hv_setup
RDZV_S=8
start_elastic_head
start_agent node-a 8
start_agent node-b 4
submit short -np 12 --min-np 8 --max-np 12 --elastic-timeout 3 -- --epochs 3 --step-delay-ms 20
wait_epoch short 0 120
epoch_lines short | grep -q '^epoch=0 size=12 ' || fail "generation 1 should form with all 12 workers (in $RDZV_S s)"
"$BIN/hvctl" --head "$HEAD" drain node-a >/dev/null || fail "drain node-a"
wait_submit 120
[ "$SUB_RC" -ne 0 ] || fail "the job should fail when min-np is not met within the elastic timeout"
assert_grep "$TMP/short.err" "--min-np is 8, and the elastic timeout (3 s) passed" "hvsubmit must say why"
pass "below min-np: waits for capacity, then grows to 12; fails at the elastic timeout"
