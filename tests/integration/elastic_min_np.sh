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
drain_waits_below_min # 4 workers are left, below min-np 8
start_agent node-c 12
ran_exact wait 2 180 "the job should succeed once node-c brings capacity"
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
fails_below_min short 8 120
pass "below min-np: waits for capacity, then grows to 12; fails at the elastic timeout"
