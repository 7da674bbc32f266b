#!/bin/sh
# Horovod's documented elastic PyTorch pattern (tests/python/horovod/pytorch_mnist_elastic.py:
# DataLoader over hvd.elastic.ElasticSampler, TorchState with the sampler, record_batch after
# every step, a commit every 4 steps, set_epoch at the end of an epoch, no hvd.shutdown()) with
# only the import changed to hv.torch, on 2 agents of 1 slot, -np 2 --min-np 1: node-b's worker
# is SIGKILLed in the middle of epoch 0. The job ends 0, the survivor finishes both epochs, and
# the workers' index logs show that every epoch trained on each of the 1000 samples exactly
# once (check_indices.py: what was logged for commits that a rollback undid does not count).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/horovod/horovod.sh"
elastic_cluster 1 "node-a node-b"
TRAIN_ARGS="$HVD/pytorch_mnist_elastic.py --train-limit 1000 --test-limit 500"
# 16 steps an epoch (2 ranks x 32), 60 ms apart: the kill lands inside epoch 0 or 1.
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit el -np 2 --min-np 1 --max-np 2 $PY_ENV -- --epochs 2 --step-delay-ms 60 --index-log "$TMP/idx"
while_running 90 sh -c "[ \$(cat '$TMP'/idx/*.log 2>/dev/null | grep -c ' commit=') -ge 8 ]" \
    || fail "no commits logged: the training did not start"
kill_workers_of node-b
ended_ok 120 "a SIGKILLed worker must not fail the job"
hvd_lines el "pytorch_mnist_elastic: " >&2
[ "$(hvd_lines el "pytorch_mnist_elastic: epoch=" | wc -l)" -eq 2 ] || fail "expected 2 epoch lines"
assert_grep "$TMP/el.out" "pytorch_mnist_elastic: done epochs=2 accuracy=0\.[0-9]*$"
$PY "$HVD/check_indices.py" "$TMP/idx" 1000 2 >"$TMP/check.out" 2>&1 || { cat "$TMP/check.out" >&2; fail "an epoch did not use every sample exactly once"; }
cat "$TMP/check.out" >&2
grep -q "restarts" "$TMP/check.out" || fail "no restart logged"
grep -Eq '\(([3-9]|[1-9][0-9]+) restarts' "$TMP/check.out" || fail "the survivor did not restart after the kill"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
# The death watch may name the kill first ("was lost: its process ended"); the signal then
# follows in a job.note from node-b's agent.
sed -n 2p "$TMP/rounds" | grep -Eq '^2 1 rollback node-a .*rank 1 on node-b (was killed by signal SIGKILL|was lost: its process ended)' \
    || fail "g2 should roll back to 1 worker on node-a after node-b's worker was killed"
assert_no_grep "$TMP/el.err" "Traceback"
pass "Horovod's elastic pattern with ElasticSampler: a SIGKILLed worker, every epoch exact"
