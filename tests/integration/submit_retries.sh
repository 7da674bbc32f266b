#!/bin/sh
# hvsubmit --retries with a program checkpoint: the restart-the-job policy (issue "Autoscaler",
# item 8, the policy the spot benchmark compares with). A fixed-size job whose worker fails is
# submitted again; the new workers resume from elastic_train's checkpoint (hv_state_save and
# hv_state_load) and the job completes with every sample once per epoch. A job that keeps
# failing stops after N retries with its failure's exit status.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
start_head
start_agent a 2
# Checkpoints every 5 steps; rank 1 exits with status 3 at epoch 1, batch 12 (step 75 of the
# job): the last checkpoint is at epoch 1, batch 10.
"$BIN/hvsubmit" --head "$HEAD" -np 2 --retries 2 "$TRAIN" $TRAIN_ARGS --epochs 2 \
    --checkpoint "$TMP/ck" --checkpoint-every 5 --exit-at 1:12:1:3 --step-log "$TMP/steps" \
    >"$TMP/r.out" 2>"$TMP/r.err" || fail "the retried job failed: $(tail -3 "$TMP/r.err")"
assert_grep "$TMP/r.err" "job 1 failed; submitting it again (retry 1 of 2)"
assert_grep "$TMP/r.err" "job 2 succeeded"
assert_grep "$TMP/r.err" "resumed from $TMP/ck at epoch 1, step 10"
check_exact r 2
[ "$(stat -c %a "$TMP/ck")" = 600 ] || fail "the checkpoint must be 0600"
# Steps started: 63 per epoch; the failed attempt started steps 10..12 of epoch 1, which the
# second one redid (the step log shows them twice).
total=$(wc -l <"$TMP/steps")
[ "$total" -eq $(( 126 + 3 )) ] || fail "expected 129 steps started (126 + 3 redone), saw $total"
[ "$(grep -c '^1 11 ' "$TMP/steps")" -eq 2 ] || fail "step 11 of epoch 1 should have run twice"

# A job that always fails: 1 + 1 attempts, then the failing rank's status.
"$BIN/hvsubmit" --head "$HEAD" -np 1 --retries 1 "$EX/fail" 7 >"$TMP/f.out" 2>"$TMP/f.err"
rc=$?
[ "$rc" -eq 7 ] || fail "hvsubmit should exit with the failing rank's status 7, got $rc"
[ "$(grep -c 'submitting it again' "$TMP/f.err")" -eq 1 ] || fail "expected exactly one retry"
# --retries needs hvsubmit to follow the job.
"$BIN/hvsubmit" --head "$HEAD" --retries 1 --detach "$EX/hello" 2>"$TMP/d.err" && fail "--retries --detach accepted"
assert_grep "$TMP/d.err" "not with --detach"
pass "hvsubmit --retries restarts a failed job, which resumes from its checkpoint"
