#!/bin/sh
# Horovod's elastic synthetic benchmark (tests/python/horovod/pytorch_synthetic_benchmark_elastic.py,
# written from examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py with only the import
# changed): a TorchState holding Python objects beside the model (img_secs=[], warm=False), on 2
# agents of 1 slot, -np 2 --min-np 1; node-b's worker is SIGKILLed after iteration 1. The job
# ends 0, the survivor goes on from the last commit (objects restored: img_secs holds one entry
# per iteration, no more, no less) and prints Horovod's summary lines.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/horovod/horovod.sh"
elastic_cluster 1 "node-a node-b"
TRAIN_ARGS="$HVD/pytorch_synthetic_benchmark_elastic.py"
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit bench -np 2 --min-np 1 --max-np 2 $PY_ENV -- --num-iters 8 --num-batches-per-iter 4
while_running 90 grep -q "Iter #1: " "$TMP/bench.out" || fail "iteration 1 was not reached"
kill_workers_of node-b
ended_ok 120 "a SIGKILLed worker must not fail the job"
hvd_lines bench "" | grep -E "Iter|img/sec|synthetic" >&2
assert_grep "$TMP/bench.out" "Img/sec per CPU: [0-9.]* +-[0-9.]*$"
assert_grep "$TMP/bench.out" "Total img/sec on 1 CPU(s): "
assert_grep "$TMP/bench.out" "synthetic: done iters=8 img_secs=8 resets=1$" \
    "the survivor's img_secs must hold one entry per iteration after the rollback"
rounds 1 | sed -n 2p | grep -q '^2 1 rollback node-a ' || fail "g2 should roll back to node-a alone"
assert_no_grep "$TMP/bench.err" "Traceback"
pass "Horovod's elastic synthetic benchmark: objects in the TorchState survive a SIGKILL"
