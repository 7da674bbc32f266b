#!/bin/sh
# A training that finished is a success, whatever fails around its last steps (issue 18). Node
# b's agent is frozen (SIGSTOP) near the end of the last epoch: its worker still trains to the
# end and reports Done to the head, but its exit is never reported, and the node is declared dead
# after the lease, with the worker lost. Before the fix the head counted that loss as a failure after
# the job had finished and failed it ("all 2 workers of generation 1 failed", hvsubmit exit 1);
# now the job succeeds with every epoch exact, and hvsubmit exits 0.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=$((4000 * T_MULT)) # longer than the last steps take, even under the sanitizers
start_elastic_head
start_agent node-a 1
start_agent node-b 1

submit one -np 2 --min-np 1 --max-np 2 -- --epochs 3 --step-delay-ms 15 \
    --epoch-log "$TMP/one.epochs" --step-log "$TMP/one.steps"
# 63 steps an epoch (4000 samples, batch 64): freeze b's agent when rank 0 starts step 50 of the
# last one.
wait_for 90 grep -q "^2 50 " "$TMP/one.steps" || fail "the last epoch's step 50 was not reached"
kill -STOP "$(agent_pid node-b)"
wait_submit 120
kill -CONT "$(agent_pid node-b)"
[ "$SUB_RC" -eq 0 ] || fail "a job whose training finished must succeed (hvsubmit rc $SUB_RC)"
check_exact one 3
grep -q 'generation 2 opened' "$TMP/one.err" && fail "no round may open after the training finished"
pass "a worker lost after its Done does not fail a finished job"
