#!/bin/sh
# hvd.SyncBatchNorm in a convolutional network (tests/python/horovod/pytorch_sync_batch_norm.py,
# only the import changed from a Horovod script), 2 ranks on 2 agents: the parameters and the
# running statistics after 5 steps equal those of torch's BatchNorm2d over the whole global batch
# in one process, and every rank holds the same.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/horovod/horovod.sh"
hv_setup
start_head
start_agents 1 node-a node-b
hvd_run sbn 2 pytorch_sync_batch_norm.py --steps 5
hvd_lines sbn "syncbn: " >&2
assert_grep "$TMP/sbn.out" "syncbn: steps=5 size=2 max_diff=[0-9.e-]* exact=1$"
pass "hvd.SyncBatchNorm: the global batch's statistics, as BatchNorm2d in one process"
