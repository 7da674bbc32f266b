#!/bin/sh
# Elastic Horovod's hosts-added-and-removed scenario of tests/integration/elastic_grow_drain.sh,
# run again with a Python program (tests/python/elastic_scenario.py: PyTorch through hv.torch,
# `hvsubmit -- /usr/bin/python3 elastic_scenario.py`; issue 14, section 6): A(2);
# -np 2 --min-np 2 --max-np 4; B(2) joins after epoch 0; once an epoch has ended on 4 workers,
# A gets SIGTERM (the cloud's preemption notice); once an epoch has ended after the drain, the
# test ends the run (--stop-file: Python may take seconds to start on a loaded machine, so the
# test waits for what happened, not for a number of epochs). The job ends 0 with rounds g1 size
# 2, g2 size 4 (added), g3 size 2 (drained, rank 0 on B), neither reset rolls back, A's Python
# workers leave with exit 0 and A's agent exits once they are gone, the reset callback sees each
# new size, and every epoch processes each sample exactly once. The same run with
# --max-resets 1 fails at the drain with the reset limit's reason.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/elastic_scenario.sh"
hv_setup
RDZV_S=60 # Python workers that join may take seconds to import torch on a loaded machine
start_elastic_head
start_agent node-a 2 --drain-deadline 60
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit run -np 2 --min-np 2 --max-np 4 $PY_ENV -- --epochs 60 --step-delay-ms 30 --stop-file "$TMP/run.stop"
wait_epoch run 0 90
start_agent node-b 2
wait_round run 2 4
wait_next_epoch run
kill -TERM "$(agent_pid node-a)"
wait_round run 3 2
wait_next_epoch run
touch "$TMP/run.stop"
stopped_exact run "the job should succeed"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
[ "$(wc -l <"$TMP/rounds")" -eq 3 ] || fail "expected 3 rounds"
sed -n 1p "$TMP/rounds" | grep -q '^1 2 - node-a start' || fail "g1 should be 2 workers on node-a"
sed -n 2p "$TMP/rounds" | grep -q '^2 4 - node-a grow:' || fail "g2 should be 4 workers, added, no rollback"
sed -n 3p "$TMP/rounds" | grep -q '^3 2 - node-b drain: node node-a' || fail "g3 should be 2 workers after the drain, rank 0 on node-b, no rollback"
grep -q '"kind": "worker.fail"' "$TMP/events-1.json" && fail "a drained Python worker counted as a failure"
[ "$(grep -c '"kind": "worker.left"' "$TMP/events-1.json")" -eq 2 ] || fail "both workers of node-a should have left"
[ "$(grep -c '^hvsubmit: rank [0-3] on node-a exited with status 0 after leaving the job' "$TMP/run.err")" -eq 2 ] \
    || fail "both drained Python workers should exit 0"
epoch_lines run | grep -q '^epoch=0 size=2 generation=1 rank0=node-a' || fail "epoch 0 should run on 2 workers in g1"
epoch_lines run | grep -q ' size=4 generation=2 rank0=node-a ' || fail "an epoch should end on 4 workers in g2"
epoch_lines run | tail -n 1 | grep -q "^epoch=$((N - 1)) size=2 generation=3 rank0=node-b " \
    || fail "the last epoch should end on node-b in g3"
assert_grep "$TMP/run.err" "elastic_scenario: reset: 4 workers (generation 2)" "the reset callback sees the growth"
assert_grep "$TMP/run.err" "elastic_scenario: reset: 2 workers (generation 3)" "the reset callback sees the drain"
wait_for 20 sh -c "! kill -0 $(agent_pid node-a) 2>/dev/null" || fail "the drained agent did not exit"
wait "$(agent_pid node-a)"; [ $? -eq 0 ] || fail "the drained agent should exit 0"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job.txt"
assert_grep "$TMP/job.txt" "GENERATION: 3 (2 workers)"
assert_grep "$TMP/job.txt" "RESETS:     2"

# --max-resets 1: the same on node-b (A's role now) and node-c; the drain would be reset 2.
# shellcheck disable=SC2086
submit lim -np 2 --min-np 2 --max-np 4 --max-resets 1 $PY_ENV -- --epochs 60 --step-delay-ms 30
wait_epoch lim 0 90
start_agent node-c 2
wait_round lim 2 4
wait_next_epoch lim
kill -TERM "$(agent_pid node-b)"
wait_submit 60
[ "$SUB_RC" -ne 0 ] || fail "the job should fail past --max-resets 1"
assert_grep "$TMP/lim.err" "reset 2 was needed (drain: node node-b" "hvsubmit must say why"
assert_grep "$TMP/lim.err" "but --max-resets is 1"
for f in run lim; do assert_no_grep "$TMP/$f.err" "Traceback"; done
pass "Python: grow at a check, drain without rollback, rounds recorded, reset limit"
