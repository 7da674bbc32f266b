# tests/python/horovod/horovod.sh: helpers for the end-to-end tests of the scripts written from
# Horovod's documentation and examples (tests/python/horovod/*.py, run with only the import
# changed to hv.torch; tests/integration/python_horovod_*.sh), sourced after tests/lib.sh and
# tests/elastic.sh. Each script is submitted as `hvsubmit ... -- /usr/bin/python3 SCRIPT ARGS`
# through elastic.sh's submit and wait_submit.
# shellcheck disable=SC2034 # TRAIN, TRAIN_ARGS, PY_ENV: read by elastic.sh and the tests

python_env
HVD=$HV_SRC_DIR/tests/python/horovod
# PY_ENV ships examples/python/train_fmnist.py too: the Fashion-MNIST reader the scripts import.
PY_ENV="--file $HV_SRC_DIR/examples/python/train_fmnist.py $PY_ENV"

# hvd_lines NAME PREFIX: rank 0's lines starting with PREFIX, without the log prefix.
hvd_lines() { sed -n "s/^\[[0-9]*\]<stdout>:$2/$2/p" "$TMP/$1.out"; }

# hvd_run NAME NP SCRIPT [ARGS...]: runs tests/python/horovod/SCRIPT ARGS on NP ranks through
# hvsubmit (output in $TMP/NAME.out and .err), bounded; fails unless hvsubmit exits 0.
hvd_run() {
    local name=$1 np=$2 script=$3; shift 3
    TRAIN_ARGS="$HVD/$script"
    # shellcheck disable=SC2086 # PY_ENV: zero or more hvsubmit options
    submit "$name" -np "$np" $PY_ENV -- "$@"
    wait_submit 120
    [ "$SUB_RC" -eq 0 ] || fail "$script on $np ranks: hvsubmit exit $SUB_RC"
}

# hvd_cluster: hv_setup, a head, and node-a (2 slots) and node-b (1 slot): 3 ranks on 2 hosts.
hvd_cluster() {
    hv_setup
    start_head
    start_agent node-a 2
    start_agent node-b 1
}
