#!/bin/sh
# An agent with a wrong token is refused with a clear message and exits non-zero; the head keeps
# running and lists no node.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
"$BIN/hvagent" join "$HEAD" --token wrong-token --name intruder --work-dir "$TMP/agent-x" \
    >"$TMP/agent.out" 2>"$TMP/agent.err"
ec=$?
[ $ec -ne 0 ] || fail "hvagent with a wrong token exited 0"
assert_grep "$TMP/agent.err" "refused" "the agent must say it was refused"
assert_grep "$TMP/agent.err" "token" "the message must name the token"
kill -0 "$HEAD_PID" || fail "the head died"
"$BIN/hvctl" --head "$HEAD" --json nodes >"$TMP/nodes.out" || fail "hvctl nodes failed"
assert_no_grep "$TMP/nodes.out" "intruder" "a refused node must not be listed"
pass "wrong token refused"
