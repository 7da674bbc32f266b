#!/bin/sh
# examples/python/train_fmnist.py (PyTorch through hv.torch) survives a `kill -9` of a worker in
# the middle of an epoch (issue 14, sections 2, 4 and 6): 2 agents of 1 slot, -np 2 --min-np 1;
# once epoch 0 is printed, node-b's worker is SIGKILLed from outside. The job ends 0, both
# epochs are printed once and trained on every sample exactly once, g2 rolls back to
# the last commit on 1 worker, the learning rate is rescaled to the new size by the reset
# callback, and epoch 1 ends on 1 worker. The survivor learns of the kill from the victim's
# death-watch mark.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/train_fmnist.sh"
elastic_cluster 1 "node-a node-b"
# Epochs of about 1 s (16 steps, 30 ms apart), so that the kill lands inside epoch 1.
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit kill -np 2 --min-np 1 --max-np 2 $PY_ENV -- --epochs 2 --step-delay-ms 30
wait_epoch kill 0
victims=$(agent_workers node-b)
[ -n "$victims" ] || fail "no worker of node-b to kill"
# shellcheck disable=SC2086
kill -KILL $victims
wait_submit 60
[ "$SUB_RC" -eq 0 ] || fail "a SIGKILLed worker must not fail the job (rc $SUB_RC)"
epoch_lines kill >&2
check_exact kill 2
done_line kill 2 || fail "rank 0 did not print the done line"
epoch_lines kill | grep -q '^epoch=0 size=2 generation=1 ' || fail "epoch 0 should run on 2 workers in g1"
epoch_lines kill | grep -q '^epoch=1 size=1 generation=2 rank0=node-a ' || fail "epoch 1 should end on node-a alone in g2"
assert_grep "$TMP/kill.out" "train_fmnist: done epochs=2 accuracy=0\.[0-9]* resets=1$"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
# The round's reason names the kill: from its agent's exit report, or, when a ring neighbour on
# this machine saw the worker die first (death watch), as an end seen on its mark, with the agent's
# report of how told afterwards (a job.note).
sed -n 2p "$TMP/rounds" | grep -Eq '^2 1 rollback node-a .*rank 1 on node-b (was killed by signal SIGKILL|was lost: its process ended)' \
    || fail "g2 should roll back to 1 worker on node-a after node-b's worker was killed"
assert_grep "$TMP/kill.err" "train_fmnist: reset: 1 workers (generation 2); peak learning rate 0.05 -> 0.025" \
    "the reset callback rescales the learning rate"
# Both workers run on this machine: the survivor learns of the kill from the victim's death-watch
# mark (worker_lib/rdzv/alive.c), before the kernel has torn down the torch process and closed
# its sockets.
assert_grep "$TMP/kill.err" "rank 0: ring neighbour rank 1 (worker [0-9]*) died (its death-watch mark)" \
    "the survivor sees the kill through the death watch"
assert_no_grep "$TMP/kill.err" "Traceback"
pass "a SIGKILLed Python worker: the job goes on from the last commit, every epoch exact"
