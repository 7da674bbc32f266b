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
TRAIN_ARGS="$HV_SRC_DIR/examples/python/train_ddp.py --train-limit 1000 --test-limit 500 --threads 1"
PY_PREFIX=train_ddp
# train_ddp.py imports train_fmnist.py: --workdir examples/python ships it beside the script.
elastic_cluster 1 "node-a node-b"
# Epochs of 1000 samples in 32 steps of 32 on 1 worker, 40 ms apart: about 3 s, time enough
# for the new worker to start python and torch within epoch 1.
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit grow --grow 0:1,1:2 --max-np 2 --workdir "$HV_SRC_DIR/examples/python" $PY_ENV -- --epochs 3 --step-delay-ms 40
wait_submit 90
[ "$SUB_RC" -eq 0 ] || fail "the growing DDP job failed (rc $SUB_RC)"
epoch_lines grow >&2
check_exact grow 3
[ "$(size_of grow 0)" -eq 1 ] || fail "epoch 0 should run on 1 worker, ran on $(size_of grow 0)"
[ "$(size_of grow 2)" -eq 2 ] || fail "epoch 2 should run on 2 workers, ran on $(size_of grow 2)"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
sed -n 2p "$TMP/rounds" | grep -q '^2 2 - node-[ab] grow' || fail "g2 should add a worker without a rollback"
assert_grep "$TMP/grow.err" "train_ddp: reset: 2 workers (generation 2); peak learning rate 0.025 -> 0.05" \
    "the reset callback rescales the learning rate"
assert_no_grep "$TMP/grow.err" "Traceback"
pass "a DDP script grows on its schedule, every epoch exact"
