# tests/python/train_fmnist.sh: helpers for the end-to-end tests of examples/python/train_fmnist.py
# (tests/integration/python_elastic_*.sh), sourced after tests/lib.sh and tests/elastic.sh. They
# reuse elastic.sh's submit, wait_submit, check_exact, rounds and agent_workers with the Python
# program in place of elastic_train: `hvsubmit ... /usr/bin/python3 train_fmnist.py ARGS`.
# examples/python/train_ddp.py (the same training as a DistributedDataParallel script) prints the
# same lines with its own prefix: its tests set TRAIN_ARGS to it and PY_PREFIX=train_ddp.
# shellcheck disable=SC2034 # TRAIN, TRAIN_ARGS, PY_ENV: read by elastic.sh and the tests

PY=/usr/bin/python3
skip_without_torch
TRAIN=$PY
# Short epochs that still learn: 1000 samples (16 steps of 2 x 32), 500 test samples, one torch
# thread per worker (the test machine's cores are shared by every worker).
TRAIN_ARGS="$HV_SRC_DIR/examples/python/train_fmnist.py --train-limit 1000 --test-limit 500 --threads 1"
# Under the sanitizers libhv.so is instrumented: the uninstrumented interpreter loads it with the
# sanitizer runtimes preloaded (as tests/integration/python_job.sh does), leak detection off.
PRE=$(ldd "$BIN/../lib/libhv.so" 2>/dev/null | awk '/lib(a|ub)san/ { printf "%s%s", s, $3; s = ":" }')
PY_ENV=""
PY_PREFIX=train_fmnist
[ -n "$PRE" ] && PY_ENV="--env LD_PRELOAD=$PRE --env ASAN_OPTIONS=detect_leaks=0"

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
