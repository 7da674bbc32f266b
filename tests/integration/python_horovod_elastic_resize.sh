#!/bin/sh
# Horovod's documented elastic pattern with hvd.elastic.ElasticSampler
# (tests/python/horovod/pytorch_mnist_elastic.py, only the import changed) while ranks are added
# and drained in the middle of epochs: -np 1 --min-np 1 --max-np 2 on node-a (1 slot); node-b
# joins (the job grows to 2 at a commit, without a rollback: the samples recorded so far are
# exchanged before the membership check, the rest re-partitioned between the two ranks), then
# node-b is drained (SIGTERM to its agent: back to 1 rank, without a rollback). The job ends 0 at
# its stop file, and the workers' index logs show every epoch trained on each sample exactly once.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/horovod/horovod.sh"
RDZV_S=60 # a worker that joins may take seconds to import torch on a loaded machine
elastic_cluster 1 "node-a"
TRAIN_ARGS="$HVD/pytorch_mnist_elastic.py --train-limit 1000 --test-limit 200"
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit rs -np 1 --min-np 1 --max-np 2 $PY_ENV -- --epochs 40 --step-delay-ms 40 \
    --index-log "$TMP/idx" --stop-file "$TMP/rs.stop"
epochs_seen() { grep -c "pytorch_mnist_elastic: epoch=" "$TMP/rs.out"; }
while_running 90 grep -q "pytorch_mnist_elastic: epoch=0 " "$TMP/rs.out" || fail "epoch 0 did not end"
start_agent node-b 1 --drain-deadline 60
while_running 90 grep -q "^hvsubmit: generation 2: 2 workers" "$TMP/rs.err" || fail "the job did not grow to 2"
n=$(epochs_seen)
while_running 60 sh -c "[ \$(grep -c 'pytorch_mnist_elastic: epoch=' '$TMP/rs.out') -gt $((n + 1)) ]" \
    || fail "no epoch ended on 2 workers"
kill -TERM "$(agent_pid node-b)"
while_running 60 grep -q "^hvsubmit: generation 3: 1 workers" "$TMP/rs.err" || fail "the drain did not shrink the job to 1"
n=$(epochs_seen)
while_running 60 sh -c "[ \$(grep -c 'pytorch_mnist_elastic: epoch=' '$TMP/rs.out') -gt $n ]" \
    || fail "no epoch ended after the drain"
touch "$TMP/rs.stop"
wait_submit 120
[ "$SUB_RC" -eq 0 ] || fail "the job failed (rc $SUB_RC)"
hvd_lines rs "pytorch_mnist_elastic: " >&2
e=$(sed -n 's/.*pytorch_mnist_elastic: done epochs=\([0-9]*\) .*/\1/p' "$TMP/rs.out")
[ -n "$e" ] && [ "$e" -lt 40 ] || fail "the run should end at its stop file (done epochs '$e')"
$PY "$HVD/check_indices.py" "$TMP/idx" 1000 "$e" >"$TMP/check.out" 2>&1 || { cat "$TMP/check.out" >&2; fail "an epoch did not use every sample exactly once"; }
cat "$TMP/check.out" >&2
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
sed -n 2p "$TMP/rounds" | grep -q '^2 2 - node-a grow' || fail "g2 should add node-b's worker without a rollback"
sed -n 3p "$TMP/rounds" | grep -q '^3 1 - node-a drain' || fail "g3 should drain node-b without a rollback"
assert_no_grep "$TMP/rs.err" "Traceback"
pass "ElasticSampler with a rank added and drained mid-run: every epoch exact"
