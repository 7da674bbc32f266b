#!/bin/sh
# Below min-np, an elastic Python job waits for capacity instead of deadlocking (horovod#3494):
# tests/integration/elastic_min_np.sh's scenario run again with a Python program
# (tests/python/elastic_scenario.py: PyTorch through hv.torch, `hvsubmit -- /usr/bin/python3
# elastic_scenario.py`; issue 14, section 6), at a size this machine's cores can hold in Python:
#  1. A(2) and B(1); -np 3 --min-np 2 --max-np 3; A is drained: the survivor on B waits in an
#     open round; C(2) joins: the job grows onto C, a round of 3 forms with rank 0 on B (the
#     oldest survivor); once an epoch ends there the test ends the run (--stop-file: Python may
#     take seconds to start on a loaded machine), and the job ends 0 with exact epochs;
#  2. the same drain with no capacity anywhere, on a cluster of its own (a new head and agents A(2)
#     and B(1)): the job fails when --elastic-timeout passes, saying that min-np was not met.
#     A round below min-np fails at the later of --elastic-timeout and the head's
#     rendezvous_timeout_s (docs/internals.md): part 1's 60 s (for Python workers joining
#     late) would make part 2 wait a minute, so its head has 15 s; its workers all start at once,
#     and its first round must still form with all 3 (asserted below).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/elastic_scenario.sh"
RDZV_S=60 # Python workers that join may take seconds to import torch on a loaded machine
elastic_cluster 2 "node-a"
start_agent node-b 1
# shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
submit wait -np 3 --min-np 2 --max-np 3 $PY_ENV -- --epochs 60 --step-delay-ms 30 --stop-file "$TMP/wait.stop"
wait_epoch wait 0 90
drain_waits_below_min # 1 worker is left, below min-np 2
start_agent node-c 2
while_running 90 grep -Eq "^hvsubmit: generation ([2-9]|[1-9][0-9]+): 3 workers" "$TMP/wait.err" \
    || fail "a round of 3 workers should form once node-c joins"
wait_next_epoch wait
touch "$TMP/wait.stop"
stopped_exact wait "the job should succeed once node-c brings capacity"
rounds 1 >"$TMP/r1"; cat "$TMP/r1"
tail -n 1 "$TMP/r1" | grep -q '^[0-9]* 3 - node-b ' || fail "the last round should have 3 workers, rank 0 on node-b"
epoch_lines wait | tail -n 1 | grep -q "^epoch=$((N - 1)) size=3 .*rank0=node-b " \
    || fail "the last epoch should end on 3 workers, rank 0 on node-b"

assert_no_grep "$TMP/wait.err" "Traceback"

# No capacity: a new cluster of A(2) and B(1) runs a new job, A is drained: nothing can replace
# it, so the job fails when the elastic timeout passes, saying why.
hv_cleanup
PIDS=""
hv_setup
RDZV_S=15
start_elastic_head
start_agent node-a 2
start_agent node-b 1
# shellcheck disable=SC2086
submit short -np 3 --min-np 2 --max-np 3 --elastic-timeout 3 $PY_ENV -- --epochs 60 --step-delay-ms 30
wait_epoch short 0 90
[ "$(size_of short 0)" = 3 ] || fail "generation 1 should form with all 3 workers (in $RDZV_S s)"
fails_below_min short 2 60
# A worker that was re-joining when the job ended raises HvError saying so (which worker, if
# any, gets there first is a race); never NotInitializedError's "call hv.torch.init() first".
assert_no_grep "$TMP/short.err" "call hv.torch.init() first"
pass "Python, below min-np: waits for capacity, then grows to 3; fails at the elastic timeout"
