#!/bin/sh
# examples/python/train_fmnist.py (PyTorch through hv.torch) through a drain (issue 14, sections
# 2, 4 and 6): 2 agents of 1 slot, -np 2 --min-np 1; once epoch 0 is printed, node-a's agent gets
# SIGTERM (a preemption notice). The job ends 0, both epochs are printed once and
# trained on every sample exactly once, g2 has 1 worker on node-b without a rollback, the
# drained worker leaves with exit 0 (worker.left, no worker.fail) and the drained agent exits 0.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/train_fmnist.sh"
elastic_cluster 1 "node-b"
start_agent node-a 1 --drain-deadline 30
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit drain -np 2 --min-np 1 --max-np 2 $PY_ENV -- --epochs 2 --step-delay-ms 30
wait_epoch drain 0
kill -TERM "$(agent_pid node-a)"
ended_exact drain 2 "a drain must not fail the job"
epoch_lines drain | grep -q '^epoch=1 size=1 generation=2 rank0=node-b ' || fail "epoch 1 should end on node-b alone in g2"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
[ "$(wc -l <"$TMP/rounds")" -eq 2 ] || fail "expected 2 rounds"
sed -n 2p "$TMP/rounds" | grep -q '^2 1 - node-b drain: node node-a' \
    || fail "g2 should be 1 worker on node-b after the drain, without a rollback"
grep -q '"kind": "worker.fail"' "$TMP/events-1.json" && fail "the drained worker counted as a failure"
grep -q '"kind": "worker.left"' "$TMP/events-1.json" || fail "the drained worker should have left"
assert_grep "$TMP/drain.err" "^hvsubmit: rank [01] on node-a exited with status 0 after leaving the job" \
    "the drained worker exits 0"
wait_for 20 sh -c "! kill -0 $(agent_pid node-a) 2>/dev/null" || fail "the drained agent did not exit"
wait "$(agent_pid node-a)"; [ $? -eq 0 ] || fail "the drained agent should exit 0"
assert_no_grep "$TMP/drain.err" "Traceback"
pass "a drained Python worker leaves with 0, the job goes on without a rollback, every epoch exact"
