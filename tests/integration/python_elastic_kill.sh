#!/bin/sh
# examples/python/train_fmnist.py (PyTorch through hv.torch) survives a `kill -9` of a worker in
# the middle of an epoch (issue 14, sections 2, 4 and 6): 2 agents of 1 slot, -np 2 --min-np 1;
# once epoch 0 is printed, node-b's worker is SIGKILLed from outside. The job ends 0, both
# epochs are printed once and trained on every sample exactly once, g2 rolls back to
# the last commit on 1 worker, the learning rate is rescaled to the new size by the reset
# callback, and epoch 1 ends on 1 worker. The survivor learns of the kill from the victim's
# death-watch mark.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/train_fmnist.sh"
elastic_cluster 1 "node-a node-b"
# Epochs of about 1 s (16 steps, 30 ms apart), so that the kill lands inside epoch 1.
node_b_killed kill
# Both workers run on this machine: the survivor learns of the kill from the victim's death-watch
# mark (worker_lib/rdzv/alive.c), before the kernel has torn down the torch process and closed
# its sockets.
assert_grep "$TMP/kill.err" "rank 0: ring neighbour rank 1 (worker [0-9]*) died (its death-watch mark)" \
    "the survivor sees the kill through the death watch"
assert_no_grep "$TMP/kill.err" "Traceback"
pass "a SIGKILLed Python worker: the job goes on from the last commit, every epoch exact"
