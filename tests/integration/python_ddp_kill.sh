#!/bin/sh
# examples/python/train_ddp.py (a DistributedDataParallel script on hv: hv.torch.init() and
# hv.torch.parallel.DistributedDataParallel, TorchState around the DDP model and a plain torch
# optimizer) survives a `kill -9` of a worker in the middle of an epoch (issue 27, section 2):
# 2 agents of 1 slot, -np 2 --min-np 1; once epoch 0 is printed, node-b's worker is SIGKILLed
# from outside. The job ends 0, both epochs are printed once and trained on every sample exactly
# once, g2 rolls back to the last commit on 1 worker (the buckets in flight are dropped), the
# reset callback rescales the learning rate, and epoch 1 ends on 1 worker.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/train_fmnist.sh"
use_train_ddp
elastic_cluster 1 "node-a node-b"
# Epochs of about 1 s (16 steps, 30 ms apart), so that the kill lands inside epoch 1.
node_b_killed kill --workdir "$HV_SRC_DIR/examples/python"
# It learned: the CNN on 1000 samples reaches well above chance (0.1) in 2 epochs.
acc=$(sed -n 's/.*train_ddp: done epochs=2 accuracy=\([0-9.]*\) .*/\1/p' "$TMP/kill.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.5) }' || fail "accuracy $acc after 2 epochs: DDP did not train"
assert_no_grep "$TMP/kill.err" "Traceback"
pass "a SIGKILLed worker of a DDP script: the job goes on from the last commit, every epoch exact"
