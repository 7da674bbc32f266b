#!/bin/sh
# A Python worker ends its part of the job as its process ends, as Horovod's do at interpreter
# exit (issue 27): without hvd.shutdown(), a 2-rank script (tests/python/exit_job.py) that
# returns ends the job with status 0; a rank that raises fails the job (status 1, not Done); a
# sys.exit(3) is the job's status 3; os._exit(0), which skips every exit handler, fails the job
# with the head's account (the rank did not call hv_shutdown). 2 agents of 1 slot.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/python/horovod/horovod.sh"
JOB=$HV_SRC_DIR/tests/python/exit_job.py
# shellcheck disable=SC2086 # PY_ENV: hvsubmit options (the sanitizer runtimes, where needed)
set -- $PY_ENV
hv_setup
start_head
start_agent node-a 1
start_agent node-b 1

"$BIN/hvsubmit" -np 2 "$@" -- $PY "$JOB" return >"$TMP/ret.out" 2>"$TMP/ret.err"; ec=$?
[ $ec -eq 0 ] || fail "a script that returns without hvd.shutdown(): hvsubmit exit $ec, want 0"
assert_grep "$TMP/ret.out" "^\[1\]<stdout>:rank 1 sum 3$"
assert_grep "$TMP/ret.err" "succeeded" "the job's end line"

"$BIN/hvsubmit" -np 2 "$@" -- $PY "$JOB" raise >"$TMP/raise.out" 2>"$TMP/raise.err"; ec=$?
[ $ec -eq 1 ] || fail "a rank that raises: hvsubmit exit $ec, want 1"
assert_grep "$TMP/raise.err" "rank 1 fails on purpose"
assert_grep "$TMP/raise.err" "rank 1 on node-[ab] exited with status 1" "the failed rank is named"

"$BIN/hvsubmit" -np 2 "$@" -- $PY "$JOB" exit3 >"$TMP/x3.out" 2>"$TMP/x3.err"; ec=$?
[ $ec -eq 3 ] || fail "sys.exit(3) without hvd.shutdown(): hvsubmit exit $ec, want 3"

"$BIN/hvsubmit" -np 2 "$@" -- $PY "$JOB" os_exit >"$TMP/ox.out" 2>"$TMP/ox.err"; ec=$?
[ $ec -ne 0 ] || fail "os._exit(0) skips the exit handlers: the job must fail"
assert_grep "$TMP/ox.err" "did not call hv_shutdown" "the head says why"
pass "Python workers end their part of the job at exit: return, raise, sys.exit, os._exit"
