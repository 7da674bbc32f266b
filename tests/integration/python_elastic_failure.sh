#!/bin/sh
# Elastic Horovod's failure scenarios of tests/integration/elastic_failure.sh, run again with a
# Python program (tests/python/elastic_scenario.py: PyTorch through hv.torch, submitted as
# `hvsubmit -- /usr/bin/python3 elastic_scenario.py`; issue 14, section 6), on A(2) and B(2) with
# -np 4 --min-np 2 --max-np 4:
#  1. a reference run without failures: one local process, no head (the sampler's constant
#     global batch makes the optimisation the same at any world size), run beside case 2;
#  2. the rank-0 worker is SIGKILLed at epoch 1, step 0: the job ends 0, every epoch processes
#     each sample exactly once, the final accuracy is within 0.01 of the reference (same seed,
#     constant global batch), g2 rolls back to 2 workers on B, the reset callback ran, and
#     node-a is barred from that job (event);
#  3. the rank-0 worker exits 1 at epoch 1, step 0: the job ends 0; g2 has 2 workers, rank 0 on
#     B, after a rollback; epoch 1 is neither lost nor repeated;
#  4. every rank exits 1 at epoch 1 (in every generation): the job fails with status 1, naming
#     the exits, and no round closes after the generation whose workers all failed.
# Cases 2 and 3 use --epoch-log, and case 4 :every, for the reasons elastic_failure.sh gives (a
# peer a few milliseconds behind the failing rank may roll back and redo the epoch's end).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/elastic_scenario.sh"
elastic_cluster 2 "node-a node-b"
E="-np 4 --min-np 2 --max-np 4 $PY_ENV --"

# shellcheck disable=SC2086 # TRAIN_ARGS: the program and its arguments
LD_PRELOAD=$PRE PYTHONPATH="$HV_SRC_DIR/worker_lib/python" HV_LIBRARY="$BIN/../lib/libhv.so" \
    $PY $TRAIN_ARGS --epochs 3 >"$TMP/ref.out" 2>"$TMP/ref.err" &
REF_PID=$!
PIDS="$PIDS $REF_PID"

# shellcheck disable=SC2086 # E: hvsubmit options
submit kill $E --epochs 3 --kill-at 1:0:0 --step-delay-ms 5 --epoch-log "$TMP/kill.epochs"
ran_exact kill 3 90 "a SIGKILLed Python worker must not fail the job"
wait "$REF_PID" || fail "the reference run failed (rc $?)"
ref=$(sed -n 's/^elastic_scenario: done .*accuracy=\([0-9.]*\).*/\1/p' "$TMP/ref.out")
[ -n "$ref" ] || fail "the reference run printed no done line"
acc=$(final_accuracy kill)
close_enough "$acc" "$ref" 0.01 || fail "accuracy $acc after a failure is not within 0.01 of $ref"
[ "$(grep -c '^hvsubmit: job 1 succeeded' "$TMP/kill.err")" -eq 1 ] || fail "hvsubmit must say 'job 1 succeeded' once"
rank0_failed 1 "was killed by signal SIGKILL"
assert_grep "$TMP/kill.err" "elastic_scenario: reset: 2 workers (generation 2)" "the reset callback runs"
barred_once 1

# shellcheck disable=SC2086
submit exit1 $E --epochs 3 --exit-at 1:0:0:1 --step-delay-ms 5 --epoch-log "$TMP/exit1.epochs"
ran_exact exit1 3 90 "a Python worker's exit 1 must not fail an elastic job"
# os._exit(1) ends the process without exit()'s handlers: a ring neighbour on this machine may
# see it end on its death-watch mark first (then the agent's report of the status is a job.note).
rank0_failed 2 "exited with status 1"
epoch_lines exit1 | grep -q '^epoch=1 size=2 generation=2 rank0=node-b' || fail "epoch 1 should finish in g2 on node-b"

# shellcheck disable=SC2086
submit all $E --epochs 3 --exit-at 1:0:all:1:every
wait_submit 90
all_failed 3 all
for f in kill exit1; do assert_no_grep "$TMP/$f.err" "Traceback"; done
# A worker re-joining when the job failed raises HvError saying the head ended the job (a race
# whether one does), never NotInitializedError's "call hv.torch.init() first".
assert_no_grep "$TMP/all.err" "call hv.torch.init() first"
pass "Python: SIGKILL and exit 1 survived exactly, all-fail fails with its reason"
