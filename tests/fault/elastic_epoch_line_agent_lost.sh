#!/bin/sh
# The epoch line of a rank 0 whose agent died is not lost. The agent of rank 0's node is
# SIGKILLed (its worker keeps running: the node is declared dead only after the lease) a few steps
# before an epoch ends. Rank 0 then prints that epoch's line into a pipe nobody reads. Before, it
# wrote stdout first and died of SIGPIPE before appending the line to --epoch-log, and every rank
# had already marked the epoch printed: the line was lost. Now libhv ignores SIGPIPE, the file is
# written first, and the other ranks take rank 0's word for what was printed: every epoch's line
# is in the log exactly once, and the job ends 0 on the other node.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
elastic_cluster 1 "node-a node-b"
submit one -np 2 --min-np 1 --max-np 2 -- --epochs 3 --step-delay-ms 15 \
    --epoch-log "$TMP/one.epochs" --step-log "$TMP/one.steps"
wait_epoch_logged one 0
r0=$(sed -n 's/^elastic_train: epoch=0 .*rank0=\([^ ]*\).*/\1/p' "$TMP/one.epochs")
[ -n "$r0" ] || fail "no rank 0 in the epoch 0 line"
# 63 steps an epoch (4000 samples, batch 64): the agent goes at step 55 of epoch 1.
wait_for 60 grep -q "^1 55 " "$TMP/one.steps" || fail "epoch 1's step 55 was not reached"
kill -KILL "$(agent_pid "$r0")"
ran_exact one 3 120 "the job should end 0 on the other node"
pass "rank 0's epoch line survives the loss of its agent"
