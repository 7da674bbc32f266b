#!/bin/sh
# Uneven data with hvd.join() (tests/python/horovod/pytorch_join.py, Horovod's join with only the
# import changed), 3 ranks on 2 agents: rank r has 40 (r + 1) samples; the ranks that run out
# join and contribute zeros while the others train. The job ends 0; rank 2 joined last; the
# parameters are the same on every rank and equal a one-process replay of the training.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/horovod/horovod.sh"
hvd_cluster
hvd_run join 3 pytorch_join.py --epochs 2
hvd_lines join "join: " >&2
assert_grep "$TMP/join.out" "join: epochs=2 last=2 steps=5,10,15 max_diff=[0-9.e-]* exact=1$"
pass "hvd.join with uneven data: the ranks that ran out contribute zeros; exact"
