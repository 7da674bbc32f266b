#!/bin/sh
# examples/python/train_ddp.py (a DistributedDataParallel script on hv) on a growth schedule
# (issue 27, section 2): 2 agents of 1 slot; `hvsubmit --grow 0:1,1:2 --max-np 2` starts the job
# on 1 worker; at epoch 1 node-b's worker joins (its DDP wrapper does not broadcast at
# construction: the state's sync gives it rank 0's model). Every one of the 3 epochs is printed
# once and trained on every sample exactly once, epoch 0 runs on 1 worker, the last on 2 (DDP's
# buckets then reduced over 2 ranks), and the reset callback doubles the learning rate.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/train_fmnist.sh"
use_train_ddp
elastic_cluster 1 "node-a node-b"
# Epochs of 1000 samples in 32 steps of 32 on 1 worker, 40 ms apart: about 3 s, time enough
# for the new worker to start python and torch within epoch 1.
grown_on_schedule grow --workdir "$HV_SRC_DIR/examples/python"
assert_no_grep "$TMP/grow.err" "Traceback"
pass "a DDP script grows on its schedule, every epoch exact"
