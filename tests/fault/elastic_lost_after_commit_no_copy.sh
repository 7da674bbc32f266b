#!/bin/sh
# The other side of fault.elastic_lost_before_commit: a job that has committed steps is never
# started again from the beginning, which would repeat an epoch it may have finished. A
# one-worker elastic job with copies off (HV_STATE_COPY=0: the head has no copy) loses its node
# (agent and worker SIGKILLed) after epoch 0 was printed. libhv reported the process' first commit
# to the head before training went on, so the head knows that something was committed: the job
# fails, saying that no copy was stored ("no copy of the training state was stored outside its
# nodes yet"), and epoch 0 is printed once (no restart ran it again).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
LEASE_MS=2000
elastic_cluster 1 "node-a node-b"

# No --epoch-log: with it elastic_train does not print an epoch the file already holds, and a
# restart's second epoch 0 would not show.
submit nocopy -np 1 --min-np 1 --max-np 1 --env HV_STATE_COPY=0 -- --epochs 3 --step-delay-ms 20
wait_epoch nocopy 0
victim=""
for n in node-a node-b; do
    [ -n "$(agent_workers $n)" ] && victim=$n
done
[ -n "$victim" ] || fail "no node runs the job's worker"
kill -KILL $(agent_pid $victim) $(agent_workers $victim)
wait_submit 60
[ "$SUB_RC" -ne 0 ] || { epoch_lines nocopy >&2; fail "a job that committed steps and has no copy must not start again from the beginning"; }
assert_grep "$TMP/nocopy.err" "job 1 failed: .*(no copy of the training state was stored outside its nodes yet)" \
    "the job should fail saying that no copy was stored"
assert_no_grep "$TMP/nocopy.err" "restart: every member was lost before the first commit"
[ "$(epoch_lines nocopy | grep -c '^epoch=0 ')" -eq 1 ] || { epoch_lines nocopy >&2; fail "epoch 0 should be printed once"; }
pass "a job that committed is not restarted from the beginning when every member is lost without a copy"
