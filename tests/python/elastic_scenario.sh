# tests/python/elastic_scenario.sh: helpers for the Python versions of Elastic Horovod's
# scenarios (tests/integration/python_elastic_{failure,grow_drain,min_np}.sh), sourced after
# tests/lib.sh and tests/elastic.sh. They reuse elastic.sh's submit, wait_submit, check_exact,
# rounds, events and close_enough with tests/python/elastic_scenario.py in place of
# elastic_train: `hvsubmit ... -- /usr/bin/python3 elastic_scenario.py ARGS`.
# shellcheck disable=SC2034 # TRAIN, TRAIN_ARGS, PY_ENV: read by elastic.sh and the tests

python_env
# 1024 synthetic samples in 16 steps of a global batch of 64; 512 test samples.
TRAIN_ARGS="$HV_SRC_DIR/tests/python/elastic_scenario.py --train-limit 1024 --test-limit 512 --batch 64"
# Under the sanitizers the reference run (no head) loads libhv.so with $PRE preloaded (python_env).
# PY_ENV also ships examples/python/train_fmnist.py, whose training loop the program imports.
PY_ENV="--file $HV_SRC_DIR/examples/python/train_fmnist.py $PY_ENV"

# epoch_lines NAME: the epoch lines without the log prefix; from $TMP/NAME.epochs when the run
# wrote them there too (--epoch-log: see elastic.sh's epoch_lines).
epoch_lines() {
    if [ -f "$TMP/$1.epochs" ]; then
        sed -n 's/^elastic_scenario: epoch=/epoch=/p' "$TMP/$1.epochs"
    else
        sed -n 's/^\[[0-9]*\]<stdout>:elastic_scenario: epoch=/epoch=/p' "$TMP/$1.out"
    fi
}

# size_of NAME E: the world size of epoch E's line.
size_of() { epoch_lines "$1" | sed -n "s/^epoch=$2 size=\([0-9]*\) .*/\1/p"; }

# wait_epoch NAME E [SECS]: rank 0 printed the line of epoch E.
wait_epoch() {
    while_running "${3:-60}" grep -q "elastic_scenario: epoch=$2 " "$TMP/$1.out" || fail "epoch $2 was not reached"
}

# final_accuracy NAME: from the "done" line.
final_accuracy() { sed -n 's/.*elastic_scenario: done .*accuracy=\([0-9.]*\).*/\1/p' "$TMP/$1.out" | tail -n 1; }

# done_epochs NAME: the epochs of the "done" line (what a run stopped by --stop-file trained).
done_epochs() { sed -n 's/.*elastic_scenario: done epochs=\([0-9]*\) .*/\1/p' "$TMP/$1.out" | tail -n 1; }

# wait_round NAME G W [SECS]: hvsubmit reported generation G formed with W workers.
wait_round() {
    while_running "${4:-90}" grep -q "^hvsubmit: generation $2: $3 workers" "$TMP/$1.err" \
        || fail "$1: generation $2 with $3 workers did not form"
}

# wait_next_epoch NAME [SECS]: one more epoch line than there is now (an epoch ends after what
# the test just saw).
wait_next_epoch() {
    local n; n=$(grep -c "elastic_scenario: epoch=" "$TMP/$1.out")
    while_running "${2:-60}" lines_at_least "$TMP/$1.out" "elastic_scenario: epoch=" $((n + 1)) \
        || fail "$1: no epoch ended after the first $n"
}

# stopped_exact NAME WHAT: waits for run NAME (stopped by its --stop-file, before its 60 epochs),
# which must end 0 (else fails: WHAT); every epoch it trained exact. Sets N, the epochs trained.
stopped_exact() {
    ended_ok 90 "$2"
    epoch_lines "$1" >&2
    N=$(done_epochs "$1")
    [ -n "$N" ] && [ "$N" -lt 60 ] || fail "the run should end at its stop file (done epochs: '$N')"
    check_exact "$1" "$N"
}
