#!/bin/sh
# A clean stop leaves the machine as it was (issue "Hardening", demo item): the agents the
# `local` autoscaler started go with the head that started them, on SIGTERM or SIGINT and on
# `hvhead stop`, and the head says so. (A head killed with SIGKILL leaves them for its next
# start to adopt: autoscale_local.sh.)
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
D=$TMP/data/instances
agents() { pgrep -f -- "--work-dir $D/" 2>/dev/null | wc -l; }
no_agents() { [ "$(agents)" -eq 0 ]; }
start_head "autoscaler:" "  provider: local" "  min_nodes: 1" "  max_nodes: 2" \
    "  idle_timeout_s: 60" "  launch_timeout_s: 30" "  local:" "    slots: 1"
wait_for 20 alive_nodes_is 1 || fail "the autoscaler did not start its minimum of 1 node"
[ "$(agents)" -eq 1 ] || fail "want 1 local agent running, saw $(agents)"

# SIGINT (Ctrl-C, or the demo's cleanup): the agent goes with the head.
kill -INT "$HEAD_PID"
wait_for 15 sh -c "! kill -0 $HEAD_PID" || fail "the head did not stop on SIGINT"
wait "$HEAD_PID"; ec=$?
[ $ec -eq 0 ] || fail "the head exited $ec on SIGINT"
no_agents || fail "the local agent outlived a clean head stop: $(pgrep -a -f -- "--work-dir $D/")"
assert_grep "$TMP/head.err" "giving back its 1 instance(s) (local-1)" "the head must say it gives its instance back"

# A restart adopts nothing (the instance ended) and starts a new minimum; hvhead stop ends it too.
: >"$TMP/head.err"
"$BIN/hvhead" start --config "$TMP/head.yaml" --daemon --log-file "$TMP/head2.log" \
    >"$TMP/d.out" 2>"$TMP/d.err" || fail "hvhead --daemon: $(cat "$TMP/d.err")"
PIDS="$PIDS $(cat "$TMP/data/hvhead.pid")"
HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$TMP/d.out" | tail -n 1)
assert_grep "$TMP/head2.log" "0 instances adopted" "the ended instance must not be adopted"
wait_for 20 alive_nodes_is 1 || fail "the restarted head did not start its minimum"
"$BIN/hvhead" stop --config "$TMP/head.yaml" >"$TMP/stop.out" 2>&1 || fail "hvhead stop: $(cat "$TMP/stop.out")"
no_agents || fail "the local agent outlived hvhead stop: $(pgrep -a -f -- "--work-dir $D/")"
pass "a clean head stop gives back the local autoscaler's agents"
