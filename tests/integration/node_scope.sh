#!/bin/sh
# Node scope (Hardening issue, item 2) and one-line log records:
#  - a node that joined with the join token reports, on its own Session, `started`, a log line
#    and `exited 0` for the two workers of a job running on node-a. The head refuses each report
#    (HV-SESSION-SCOPE, with both ids) and acknowledges none: the job keeps running until its
#    real workers end, it then succeeds, and the forged line is not in `hvctl logs`. Nor may it
#    fetch job 1's binary (PERMISSION_DENIED, HV-FETCH-SCOPE): no worker on it runs that.
#  - a worker's KvPut key holding a newline cannot write a line of its own into the head's log.
. "$HV_SRC_DIR/tests/lib.sh"
/usr/bin/python3 -c "import grpc" 2>/dev/null || { echo "SKIP: python3-grpcio is not installed"; exit 77; }
hv_setup
start_head
start_agent node-a 2
# The workers run until the test releases them (after parts 1 and 2; bounded: 60 s), not for a
# fixed time: the job must still be running while the other node reports its workers' ends.
SECS=60
"$BIN/hvsubmit" -d -np 2 /bin/sh -c "echo \"secret=\$HV_WORKER_SECRET\"; i=0; \
    while [ ! -e '$TMP/release' ] && [ \$i -lt $((SECS * 10)) ]; do sleep 0.1; i=\$((i + 1)); done; \
    echo real-end" >"$TMP/s.out" 2>&1 || fail "hvsubmit failed"
wait_for 10 workers_at_least 1 2 || fail "job 1 did not start its 2 workers"
wait_for 10 state_is 1 running || fail "job 1 is not running"
WIDS=$("$BIN/hvctl" --json job 1 | /usr/bin/python3 -c \
    'import json,sys; print(" ".join(str(w["worker_id"]) for w in json.load(sys.stdin)["workers"]))')
[ -n "$WIDS" ] || fail "hvctl did not list job 1's workers"

# 1. the other node's reports
# shellcheck disable=SC2086 # one argument per worker id
/usr/bin/python3 "$HV_SRC_DIR/tests/tools/hostile_node.py" "$HEAD" "$TOKEN" node-evil \
    FORGED-BY-NODE "$(sha256sum /bin/sh | cut -d' ' -f1)" $WIDS >"$TMP/evil.out" 2>&1 \
    || fail "the hostile node could not join"
EVIL=$(sed -n 's/^node_id=//p' "$TMP/evil.out")
state_is 1 running || fail "job 1 is $(job_state 1) after another node reported its workers exited"
workers_at_least 1 2 || fail "job 1's workers are not running"
assert_grep "$TMP/evil.out" "^acked=0$" "the head acknowledged another node's reports"
assert_grep "$TMP/evil.out" "^fetch=7$" "another node fetched job 1's binary"
assert_grep "$TMP/head.err" "HV-FETCH-SCOPE: node $EVIL " "the head did not log the refused fetch"
for w in $WIDS; do
    assert_grep "$TMP/head.err" "HV-SESSION-SCOPE: node $EVIL .*refused '[a-z]*' for worker $w," \
        "the head did not log the refusal for worker $w"
done

# 2. a KvPut key with a newline, by one of job 1's workers
SA=$("$BIN/hvctl" logs 1 | sed -nE 's/.*secret=(hvw_[0-9a-f_]+).*/\1/p' | head -n 1)
[ -n "$SA" ] || fail "job 1 did not print its worker secret"
NL='
'
"$BIN/rawcall" "$HEAD" Rendezvous/KvPut job_id=1 "key=k${NL}FORGED-BY-KEY record" \
    value=v --token "$SA" >"$TMP/kv.out" 2>&1 || fail "KvPut failed: $(cat "$TMP/kv.out")"
wait_for 5 grep -qF 'k\nFORGED-BY-KEY record' "$TMP/head.err" || fail "the KvPut was not logged escaped"
assert_no_grep "$TMP/head.err" "^FORGED-BY-KEY" "a KvPut key wrote a line of its own into the head's log"

# 3. the job ends when its own workers do, and its log holds only their lines
state_is 1 running || fail "job 1 is $(job_state 1) before its workers were released"
touch "$TMP/release"
wait_for 20 state_is 1 succeeded || fail "job 1 is $(job_state 1), not succeeded"
"$BIN/hvctl" logs 1 >"$TMP/logs.out" 2>&1 || fail "hvctl logs failed"
[ "$(grep -c real-end "$TMP/logs.out")" -eq 2 ] || fail "job 1's log lacks its workers' last lines"
assert_no_grep "$TMP/logs.out" FORGED-BY-NODE "another node's log line reached hvctl logs"
kill -0 "$HEAD_PID" || fail "the head died"
pass "another node's reports on job 1's workers were refused and logged; a KvPut key stayed on one log line"
