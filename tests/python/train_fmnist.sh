# tests/python/train_fmnist.sh: helpers for the end-to-end tests of examples/python/train_fmnist.py
# (tests/integration/python_elastic_*.sh), sourced after tests/lib.sh and tests/elastic.sh. They
# reuse elastic.sh's submit, wait_submit, check_exact, rounds and agent_workers with the Python
# program in place of elastic_train: `hvsubmit ... /usr/bin/python3 train_fmnist.py ARGS`.
# examples/python/train_ddp.py (the same training as a DistributedDataParallel script) prints the
# same lines with its own prefix: its tests set TRAIN_ARGS to it and PY_PREFIX=train_ddp.
# shellcheck disable=SC2034 # TRAIN, TRAIN_ARGS, PY_ENV: read by elastic.sh and the tests

python_env
# Short epochs that still learn: 1000 samples (16 steps of 2 x 32), 500 test samples, one torch
# thread per worker (the test machine's cores are shared by every worker).
TRAIN_ARGS="$HV_SRC_DIR/examples/python/train_fmnist.py --train-limit 1000 --test-limit 500 --threads 1"
PY_PREFIX=train_fmnist

# The epoch lines of run NAME without the log prefix (train_fmnist prints elastic_train's format).
epoch_lines() {
    sed -n "s/^\[[0-9]*\]<stdout>:$PY_PREFIX: epoch=/epoch=/p" "$TMP/$1.out"
}

# size_of NAME E: the world size of epoch E's line.
size_of() { epoch_lines "$1" | sed -n "s/^epoch=$2 size=\([0-9]*\) .*/\1/p"; }

# wait_epoch NAME E: rank 0 printed the line of epoch E.
wait_epoch() {
    wait_for "${3:-60}" grep -q "$PY_PREFIX: epoch=$2 " "$TMP/$1.out" || fail "epoch $2 was not reached"
}

# done_line NAME: the final line exists (rank 0 finished).
done_line() { grep -q "$PY_PREFIX: done epochs=$2 " "$TMP/$1.out"; }

# ended_exact NAME EPOCHS WHAT: run NAME ends 0 (else fails: WHAT), every one of its EPOCHS
# epochs exact, and rank 0 printed the done line.
ended_exact() {
    ended_ok 60 "$3"
    epoch_lines "$1" >&2
    check_exact "$1" "$2"
    done_line "$1" "$2" || fail "rank 0 did not print the done line"
}

# node_b_killed NAME [hvsubmit options]: a 2-worker job of 2 epochs (one worker on each node)
# whose node-b worker is SIGKILLed after epoch 0 goes on from its last commit: it ends 0, every
# epoch exact, epoch 0 ran on 2 workers in g1 and epoch 1 on node-a alone in g2, which rolled
# back naming the kill, the done line counts one reset, and the reset callback halved the
# learning rate.
node_b_killed() {
    local name=$1; shift
    # shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
    submit "$name" -np 2 --min-np 1 --max-np 2 "$@" $PY_ENV -- --epochs 2 --step-delay-ms 30
    wait_epoch "$name" 0
    kill_workers_of node-b
    ended_exact "$name" 2 "a SIGKILLed worker must not fail the job"
    epoch_lines "$name" | grep -q '^epoch=0 size=2 generation=1 ' || fail "epoch 0 should run on 2 workers in g1"
    epoch_lines "$name" | grep -q '^epoch=1 size=1 generation=2 rank0=node-a ' || fail "epoch 1 should end on node-a alone in g2"
    assert_grep "$TMP/$name.out" "$PY_PREFIX: done epochs=2 accuracy=0\.[0-9]* resets=1$"
    rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
    sed -n 2p "$TMP/rounds" | grep -Eq '^2 1 rollback node-a .*rank 1 on node-b (was killed by signal SIGKILL|was lost: its process ended)' \
        || fail "g2 should roll back to 1 worker on node-a after node-b's worker was killed"
    assert_grep "$TMP/$name.err" "$PY_PREFIX: reset: 1 workers (generation 2); peak learning rate 0.05 -> 0.025" \
        "the reset callback rescales the learning rate"
}

# grown_on_schedule NAME [hvsubmit options]: a job of 3 epochs growing from 1 worker to 2 at
# epoch 1 (--grow 0:1,1:2) ends 0, every epoch exact, epoch 0 on 1 worker and epoch 2 on 2; g2
# added a worker without a rollback, and the reset callback doubled the learning rate.
grown_on_schedule() {
    local name=$1; shift
    # shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
    submit "$name" --grow 0:1,1:2 --max-np 2 "$@" $PY_ENV -- --epochs 3 --step-delay-ms 40
    ended_ok 90 "the growing job failed"
    epoch_lines "$name" >&2
    check_exact "$name" 3
    [ "$(size_of "$name" 0)" -eq 1 ] || fail "epoch 0 should run on 1 worker, ran on $(size_of "$name" 0)"
    [ "$(size_of "$name" 2)" -eq 2 ] || fail "epoch 2 should run on 2 workers, ran on $(size_of "$name" 2)"
    rounds 1 >"$TMP/rounds"; cat "$TMP/rounds" >&2
    sed -n 2p "$TMP/rounds" | grep -q '^2 2 - node-[ab] grow' || fail "g2 should add a worker without a rollback"
    assert_grep "$TMP/$name.err" "$PY_PREFIX: reset: 2 workers (generation 2); peak learning rate 0.025 -> 0.05" \
        "the reset callback rescales the learning rate"
}

# use_train_ddp: the runs are examples/python/train_ddp.py (the same training as a
# DistributedDataParallel script, its lines prefixed train_ddp); it imports train_fmnist.py, which
# the tests ship beside it with --workdir examples/python.
use_train_ddp() {
    TRAIN_ARGS="$HV_SRC_DIR/examples/python/train_ddp.py --train-limit 1000 --test-limit 500 --threads 1"
    PY_PREFIX=train_ddp
}
