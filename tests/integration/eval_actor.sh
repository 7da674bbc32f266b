#!/bin/sh
# The evaluation actor example (docs/actors.md, "Example: an evaluation actor"), as a user runs it
# on three 1-slot agents: a detached actor of class "evaluator" (examples/eval_actor) is created
# by name; an elastic training job (examples/elastic_train --eval-actor eval) sends it the
# committed model at the end of every epoch and does not evaluate itself; the actor's history has
# one row per epoch, in order, and the model learns (accuracy > 0.5 from the second epoch on).
# While the job runs, the evaluator's node is drained: the actor moves to the free node with its
# history (save on the drained node, load on the new one), the rows from before the drain are
# intact, and the epochs after it are appended. A job whose actor does not exist warns and ends 0.
. "$HV_SRC_DIR/tests/lib.sh"
DATA=${HV_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$DATA/t10k-images-idx3-ubyte.gz" ]; then
    echo "SKIP: Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)"
    exit 77
fi
hv_setup
start_head
start_agent node-a 1
start_agent node-b 1
start_agent node-c 1
EPOCHS=6
TRAIN="$EX/elastic_train --train-limit 4000 --test-limit 1000 --batch 64"
# The reference: the same training in one process, evaluating itself (same seed, same test
# samples): the accuracy it prints for each epoch is what the actor must find for that epoch's
# model. In the background, while the cluster part runs.
$TRAIN --epochs $EPOCHS >"$TMP/ref.out" 2>"$TMP/ref.err" &
REF_PID=$!
PIDS="$PIDS $REF_PID"

actor_field() { # NAME FIELD: a field of `hvctl actor NAME --json`
    "$BIN/hvctl" --head "$HEAD" actor "$1" --json 2>/dev/null |
        sed -nE "s/.*\"$2\": *\"?([^\",]*)\"?,?$/\1/p" | head -n 1
}
actor_is() { [ "$(actor_field "$1" state)" = "$2" ]; }
# The rows (actor_call ends the result with a newline of its own: the empty line is dropped).
history() { "$EX/actor_call" @eval history --timeout 15000 2>>"$TMP/call.err" | sed '/^$/d'; }
rows_at_least() { [ "$(history | grep -c '^epoch=')" -ge "$1" ]; }

# The evaluator: detached, named, the same test set as the job's (the first 1000 samples).
"$BIN/hvctl" --head "$HEAD" actor create --class evaluator --name eval --slots 1 \
    -- "$EX/eval_actor" --test-limit 1000 >"$TMP/create.out" 2>"$TMP/create.err" ||
    fail "hvctl actor create failed"
wait_for 20 actor_is eval alive || fail "the evaluator is '$(actor_field eval state)', not alive"
[ -z "$(history)" ] || fail "a new evaluator's history is not empty: $(history)"

# A job whose evaluation actor does not exist: a warning that names it, and training goes on.
"$BIN/hvsubmit" --head "$HEAD" -np 1 $TRAIN --epochs 1 --eval-actor nosuch \
    >"$TMP/missing.out" 2>"$TMP/missing.err" || fail "a job with a missing evaluation actor failed"
grep -q "warning: --eval-actor nosuch: cannot reach the actor .*training goes on" "$TMP/missing.err" ||
    fail "the missing actor was not reported: $(grep -i eval "$TMP/missing.err")"
grep -q "elastic_train: done epochs=1 " "$TMP/missing.out" || fail "the job did not train"

# The job: 6 epochs, slowed down so that the drain comes while it runs.
"$BIN/hvsubmit" --head "$HEAD" -np 1 $TRAIN --epochs $EPOCHS --step-delay-ms 30 \
    --eval-actor eval >"$TMP/job.out" 2>"$TMP/job.err" &
SUB_PID=$!
PIDS="$PIDS $SUB_PID"
wait_for 60 rows_at_least 2 || fail "the evaluator has not 2 rows: '$(history)'"
history >"$TMP/before.txt"
from=$(actor_field eval node)
kill -0 "$SUB_PID" 2>/dev/null || fail "the job ended before the drain (the test's timing is off)"
"$BIN/hvctl" --head "$HEAD" drain "$from" >/dev/null 2>&1 || fail "hvctl drain $from failed"
moved() { [ "$(actor_field eval moves)" = 1 ] && actor_is eval alive && [ "$(actor_field eval node)" != "$from" ]; }
wait_for 30 moved || fail "the evaluator did not move off drained $from: node $(actor_field eval node), state $(actor_field eval state)"
[ "$(actor_field eval restarts)" = 0 ] || fail "the move counted as a restart"
history >"$TMP/after-move.txt"
n=$(wc -l <"$TMP/before.txt")
head -n "$n" "$TMP/after-move.txt" | cmp -s - "$TMP/before.txt" ||
    fail "the history did not survive the move: before the drain '$(cat "$TMP/before.txt")', after '$(cat "$TMP/after-move.txt")'"

# The job ends 0, and the history has every epoch once, in order, the rows before the drain
# unchanged and the later epochs appended by the moved actor.
i=0
while kill -0 "$SUB_PID" 2>/dev/null && [ $i -lt $((600 * T_MULT)) ]; do sleep 0.1; i=$((i + 1)); done
wait "$SUB_PID" || fail "the training job failed (rc $?)"
history >"$TMP/final.txt"
cat "$TMP/final.txt"
[ "$(sed -n 's/^epoch=\([0-9]*\) .*/\1/p' "$TMP/final.txt" | tr '\n' ' ')" = "0 1 2 3 4 5 " ] ||
    fail "the history is not one row per epoch 0..5: $(cat "$TMP/final.txt")"
head -n "$n" "$TMP/final.txt" | cmp -s - "$TMP/before.txt" || fail "rows from before the drain changed"
awk '{ sub("accuracy=", "", $2); if (NR > 1 && $2 + 0 <= 0.5) bad = 1 } END { exit bad }' "$TMP/final.txt" ||
    fail "the model did not learn (accuracy <= 0.5 after the first epoch)"
grep -q "samples=1000$" "$TMP/final.txt" || fail "the actor did not evaluate the 1000 test samples"
# Each row is what the job was told (its output shows the actor's answers), and the job did not
# evaluate itself.
while read -r row; do
    grep -qF "evaluated by eval: $row" "$TMP/job.out" || fail "the job was not told '$row'"
done <"$TMP/final.txt"
[ "$(grep -c 'elastic_train: epoch=[0-9]* .* accuracy=- ' "$TMP/job.out")" -eq $EPOCHS ] ||
    fail "the job's epoch lines should say accuracy=- (evaluated by the actor)"
# The actor evaluated each epoch's committed model: its accuracy is the reference's, epoch by
# epoch (across the move and a resend too).
wait "$REF_PID" || fail "the reference run failed: $(cat "$TMP/ref.err")"
sed -n 's/^elastic_train: epoch=\([0-9]*\) .* accuracy=\([0-9.]*\) .*/\1 \2/p' "$TMP/ref.out" >"$TMP/ref.acc"
sed -n 's/^epoch=\([0-9]*\) accuracy=\([0-9.]*\) .*/\1 \2/p' "$TMP/final.txt" >"$TMP/final.acc"
cmp -s "$TMP/ref.acc" "$TMP/final.acc" ||
    fail "the actor's accuracies ($(tr '\n' ' ' <"$TMP/final.acc")) are not the job's own ($(tr '\n' ' ' <"$TMP/ref.acc"))"
pass "evaluation actor: one row per epoch from the job, accuracy > 0.5, history intact across a drain"
