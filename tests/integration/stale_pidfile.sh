#!/bin/sh
# A daemon is known by the lock it holds, never by a pid alone (issue "Hardening", item 4). A pid
# file left by a daemon that died names, once the pid is reused, an unrelated live process (here
# a `sleep`):
#  - `hvhead stop`, `hvagent stop` and `hvagent drain` signal nobody, say that no daemon runs and
#    that the pid file was stale, remove it, and exit non-zero;
#  - `hvhead start --daemon` and `hvagent join --daemon` start anyway;
#  - the real daemons are then stopped by `stop`, and the `sleep` still lives.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
write_config "$TMP/head.yaml"
sleep 120 &
SPID=$!
PIDS="$PIDS $SPID"
mkdir -p "$TMP/data" "$TMP/agent-x"
alive() { kill -0 "$SPID" 2>/dev/null || fail "$1 killed the unrelated process $SPID"; }

# hvhead stop with a stale pid file
echo "$SPID" >"$TMP/data/hvhead.pid"
"$BIN/hvhead" stop --config "$TMP/head.yaml" >"$TMP/s1.out" 2>"$TMP/s1.err" && fail "hvhead stop exited 0 with no head running"
sleep 0.2
alive "hvhead stop"
assert_grep "$TMP/s1.err" "no running head"
assert_grep "$TMP/s1.err" "stale (it named pid $SPID"
assert_no_grep "$TMP/s1.out" "stopped"
[ ! -e "$TMP/data/hvhead.pid" ] || fail "the stale pid file was left"

# hvhead start --daemon with a stale pid file: starts; stop stops the daemon, not the sleep
echo "$SPID" >"$TMP/data/hvhead.pid"
"$BIN/hvhead" start --config "$TMP/head.yaml" --daemon --log-file "$TMP/head.log" \
    >"$TMP/d.out" 2>"$TMP/d.err" || fail "hvhead start --daemon refused a stale pid file: $(cat "$TMP/d.err")"
HPID=$(cat "$TMP/data/hvhead.pid")
PIDS="$PIDS $HPID"
[ "$HPID" != "$SPID" ] || fail "the pid file still names the unrelated process"
HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$TMP/d.out" | tail -n 1)

# hvagent drain / stop / join --daemon with a stale pid file
echo "$SPID" >"$TMP/agent-x/hvagent.pid"
"$BIN/hvagent" drain --work-dir "$TMP/agent-x" >"$TMP/a0.out" 2>"$TMP/a0.err" && fail "hvagent drain exited 0 with no agent"
echo "$SPID" >"$TMP/agent-x/hvagent.pid"
"$BIN/hvagent" stop --work-dir "$TMP/agent-x" --timeout 1 >"$TMP/a1.out" 2>"$TMP/a1.err" && fail "hvagent stop exited 0 with no agent"
sleep 1.5
alive "hvagent drain/stop"
assert_grep "$TMP/a1.err" "no agent is running"
assert_grep "$TMP/a1.err" "stale (it named pid $SPID"
echo "$SPID" >"$TMP/agent-x/hvagent.pid"
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name node-x --slots 1 --work-dir "$TMP/agent-x" \
    --daemon --log-file "$TMP/agent.log" >"$TMP/a2.out" 2>"$TMP/a2.err" \
    || fail "hvagent join --daemon refused a stale pid file: $(cat "$TMP/a2.err")"
APID=$(cat "$TMP/agent-x/hvagent.pid")
PIDS="$PIDS $APID"
[ "$APID" != "$SPID" ] || fail "the agent's pid file still names the unrelated process"
# a second agent on the same pid file is refused, naming the real one
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name node-y --slots 1 --work-dir "$TMP/agent-x" \
    >"$TMP/a3.out" 2>"$TMP/a3.err" && fail "a second agent on a held pid file started"
assert_grep "$TMP/a3.err" "another agent (pid $APID)"

"$BIN/hvagent" stop --work-dir "$TMP/agent-x" >"$TMP/a4.out" 2>"$TMP/a4.err" || fail "hvagent stop failed: $(cat "$TMP/a4.err")"
kill -0 "$APID" 2>/dev/null && fail "the agent still runs after stop"
"$BIN/hvhead" stop --config "$TMP/head.yaml" >"$TMP/s2.out" 2>"$TMP/s2.err" || fail "hvhead stop failed: $(cat "$TMP/s2.err")"
assert_grep "$TMP/s2.out" "stopped (pid $HPID)"
kill -0 "$HPID" 2>/dev/null && fail "the head still runs after stop"
[ ! -e "$TMP/data/hvhead.pid" ] || fail "the head left its pid file"
alive "stopping the real daemons"
pass "stop and start find daemons by their lock; a stale pid file signals nobody"
