#!/bin/sh
# Horovod's object and start-up helpers (tests/python/horovod/pytorch_objects.py, only the import
# changed): broadcast_object (a configuration, 1 MiB from the last rank), allgather_object,
# broadcast_parameters, broadcast_optimizer_state and a named tensor broadcast, 3 ranks on 2
# agents (2 hosts: cross_size 2, not homogeneous); every check passes on every rank and the job
# ends 0 without hvd.shutdown().
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/horovod/horovod.sh"
hvd_cluster
hvd_run obj 3 pytorch_objects.py
hvd_lines obj "objects: " >&2
assert_grep "$TMP/obj.out" "objects: ok size=3 hosts=2$"
pass "broadcast_object, allgather_object, broadcast_parameters and optimizer state"
