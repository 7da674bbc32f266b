#!/bin/sh
# A running elastic job whose only copy of its training state is on the machine all its workers
# run on (here every agent reaches the head over loopback: the head's machine) is warned about by
# `hvctl status`, since losing that machine loses the job (hvctl job --json: copy_on_own_node).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
elastic_cluster 1 "node-a"
submit r -np 1 --min-np 1 --max-np 1 --env HV_STATE_COPY_FACTOR=2 -- --epochs 2 --step-delay-ms 40
wait_epoch r 0
"$BIN/hvctl" --head "$HEAD" status >"$TMP/status.txt" 2>&1
assert_grep "$TMP/status.txt" "warning: job 1's only copy of its training state is on the machine all its workers run on" \
    "hvctl status must warn that the job's only copy is on its own machine"
"$BIN/hvctl" --head "$HEAD" job 1 --json >"$TMP/job.json"
assert_grep "$TMP/job.json" '"copy_on_own_node": true'
wait_submit 120
[ "$SUB_RC" -eq 0 ] || fail "the job must end 0 (rc $SUB_RC)"
pass "hvctl status warns about a job whose only copy is on its own node"
