#!/bin/sh
# Growth over epochs through the head and the local autoscaler (issue "Autoscaler", items 4 and
# 7): `hvsubmit --grow 0:2,2:4,4:6` starts the job on 2 workers; at epochs 2 and 4 libhv asks
# the head for the next size (Rendezvous.Resize), the autoscaler buys the nodes, and the new
# workers join at the next membership check. The epoch lines show the sizes at the scheduled
# epochs, never earlier, and every sample is trained exactly once per epoch. Then a job that
# grows by its own callback (elastic_train --double-every 1) doubles 1 -> 2 -> 4.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
HV_LISTEN=127.0.0.1:$(free_port)
start_elastic_head "autoscaler:" "  provider: local" "  min_nodes: 1" "  max_nodes: 3" \
    "  idle_timeout_s: 30" "  launch_timeout_s: 30" "  local:" "    slots: 2"
wait_for 20 alive_nodes_is 1 || fail "the autoscaler did not bring the cluster to its minimum"

# Epochs of about 2.5 s (63 steps of 64 samples, 30 ms apart), long enough for a node to be
# bought and to join within the two epochs of a stage.
submit sched --grow 0:2,2:4,4:6 -- --epochs 6 --step-delay-ms 30
wait_submit 240
[ "$SUB_RC" -eq 0 ] || fail "the scheduled job failed (rc $SUB_RC): $(tail -3 "$TMP/sched.err")"
check_exact sched 6
epoch_lines sched >&2
size_of() { epoch_lines "$1" | sed -n "s/^epoch=$2 size=\([0-9]*\) .*/\1/p"; }
# The schedule's size at epoch E: 2, 2, 4, 4, 6, 6.
for e in 0 1 2 3 4 5; do
    want=$(( e < 2 ? 2 : e < 4 ? 4 : 6 )); got=$(size_of sched $e)
    [ "$got" -le "$want" ] || fail "epoch $e ran on $got workers before the schedule asked for them ($want)"
    # By the end of a stage's last epoch the job has its size (the first may still be joining).
    if [ $(( e % 2 )) -eq 1 ]; then
        [ "$got" -eq "$want" ] || fail "epoch $e: $got workers, the schedule says $want"
    fi
done
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev.txt" 2>&1
assert_grep "$TMP/ev.txt" "asks for 4 workers (was 2; .*epoch 2, growth schedule" "the resize at epoch 2 must say why"
assert_grep "$TMP/ev.txt" "asks for 6 workers (was 4; .*epoch 4, growth schedule" "the resize at epoch 4 must say why"
[ "$(alive_nodes)" -eq 3 ] || fail "the cluster should have grown to 3 nodes, has $(alive_nodes)"

# The program's own callback: double every epoch from 1 worker, up to 4 (--grow 0:1 starts the
# job on 1 worker; without it an elastic job starts on as many free slots as --max-np allows).
# The batch is per rank here, so the global batch doubles with the workers.
TRAIN_ARGS="--train-limit 4000 --test-limit 1000 --batch-per-rank 32"
submit dbl --grow 0:1 --max-np 4 -- --epochs 4 --double-every 1 --step-delay-ms 30
wait_submit 240
[ "$SUB_RC" -eq 0 ] || fail "the doubling job failed (rc $SUB_RC): $(tail -3 "$TMP/dbl.err")"
check_exact dbl 4
epoch_lines dbl >&2
for e in 0 1 2 3; do
    want=$(( e == 0 ? 1 : e == 1 ? 2 : 4 )); got=$(size_of dbl $e)
    [ "$got" -le "$want" ] || fail "doubling: epoch $e ran on $got workers before it asked ($want)"
done
[ "$(size_of dbl 3)" -eq 4 ] || fail "doubling: the last epoch should run on 4 workers, ran on $(size_of dbl 3)"
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev2.txt" 2>&1
assert_grep "$TMP/ev2.txt" "asks for 2 workers .*size callback" "the callback's resize must say why"
pass "a growth schedule and a size callback grow the job at their epochs"
