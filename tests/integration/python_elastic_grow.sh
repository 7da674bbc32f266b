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
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit grow --grow 0:1,1:2 --max-np 2 $PY_ENV -- --epochs 3 --step-delay-ms 40
wait_submit 60
[ "$SUB_RC" -eq 0 ] || fail "the growing job failed (rc $SUB_RC)"
epoch_lines grow >&2
check_exact grow 3
[ "$(size_of grow 0)" -eq 1 ] || fail "epoch 0 should run on 1 worker, ran on $(size_of grow 0)"
[ "$(size_of grow 2)" -eq 2 ] || fail "epoch 2 should run on 2 workers, ran on $(size_of grow 2)"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
sed -n 2p "$TMP/rounds" | grep -q '^2 2 - node-[ab] grow' || fail "g2 should add a worker without a rollback"
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev.txt" 2>&1
assert_grep "$TMP/ev.txt" "asks for 2 workers (was 1; .*epoch 1, growth schedule" "the resize at epoch 1 must say why"
assert_grep "$TMP/grow.err" "train_fmnist: reset: 2 workers (generation 2); peak learning rate 0.025 -> 0.05" \
    "the reset callback rescales the learning rate"
assert_no_grep "$TMP/grow.err" "Traceback"
pass "a Python job grows on its schedule, every epoch exact"
