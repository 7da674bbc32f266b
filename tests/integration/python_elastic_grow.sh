#!/bin/sh
# examples/python/train_fmnist.py (PyTorch through hv.torch) on a growth schedule (issue 14,
# sections 2, 4 and 6): 2 agents of 1 slot; `hvsubmit --grow 0:1,1:2 --max-np 2` starts the job
# on 1 worker; at epoch 1 libhv (through hv.torch.elastic.ElasticSampler's next epoch) asks the
# head for 2, and node-b's worker joins at a membership check. Every one of the 3 epochs is
# printed once and trained on every sample exactly once, epoch 0 runs on 1 worker, the last on 2,
# the reset callback doubles the learning rate, and the event log says why the job grew.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/train_fmnist.sh"
elastic_cluster 1 "node-a node-b"
# Epochs of 1000 samples in 32 steps of 32 on 1 worker, 40 ms apart: about 3 s, time enough
# for the new worker to start python and torch within epoch 1.
grown_on_schedule grow
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev.txt" 2>&1
assert_grep "$TMP/ev.txt" "asks for 2 workers (was 1; .*epoch 1, growth schedule" "the resize at epoch 1 must say why"
assert_no_grep "$TMP/grow.err" "Traceback"
pass "a Python job grows on its schedule, every epoch exact"
