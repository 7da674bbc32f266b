#!/bin/sh
# --daemon: hvhead and hvagent detach, write pid files and keep serving; `hvhead stop` and
# `hvagent stop` stop them cleanly (pid files removed); a second daemon on the same pid file is
# refused.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
write_config "$TMP/head.yaml"
port_file="$TMP/head.out"
"$BIN/hvhead" start --config "$TMP/head.yaml" --daemon --log-file "$TMP/head.log" >"$TMP/d.out" 2>&1
ec=$?
[ $ec -eq 0 ] || fail "hvhead --daemon exited $ec"
[ -s "$TMP/data/hvhead.pid" ] || fail "no pid file"
hpid=$(cat "$TMP/data/hvhead.pid")
PIDS="$PIDS $hpid"
kill -0 "$hpid" || fail "the daemon is not running"
wait_for 10 grep -q 'listening on' "$TMP/head.log" || fail "daemon did not log its ready line"
HEAD=$(grep 'listening on' "$TMP/head.log" | tail -n 1 | sed -E 's/.*listening on ([^ ]+) .*/\1/')
"$BIN/hvhead" start --config "$TMP/head.yaml" --daemon >"$TMP/d2.out" 2>&1 && fail "a second daemon on the same pid file was allowed"
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name node-d --slots 1 --work-dir "$TMP/agent-d" \
    --daemon --log-file "$TMP/agent.log" >"$TMP/a.out" 2>&1 || fail "hvagent --daemon failed"
[ -s "$TMP/agent-d/hvagent.pid" ] || fail "no agent pid file"
apid=$(cat "$TMP/agent-d/hvagent.pid")
PIDS="$PIDS $apid"
wait_for 10 sh -c "'$BIN/hvctl' --head '$HEAD' --json nodes | grep -q node-d" || fail "daemon agent did not join"
"$BIN/hvsubmit" --head "$HEAD" -np 1 "$EX/hello" >"$TMP/s.out" 2>&1 || fail "job on daemons failed"
assert_grep "$TMP/s.out" "hello from rank 0 of 1"
"$BIN/hvagent" stop --work-dir "$TMP/agent-d" >/dev/null 2>&1 || fail "hvagent stop failed"
kill -0 "$apid" 2>/dev/null && fail "the agent still runs after stop"
"$BIN/hvhead" stop --config "$TMP/head.yaml" >"$TMP/stop.out" 2>&1 || fail "hvhead stop failed"
kill -0 "$hpid" 2>/dev/null && fail "the head still runs after stop"
[ ! -e "$TMP/data/hvhead.pid" ] || fail "pid file left behind"
assert_grep "$TMP/head.log" "stopped"
"$BIN/hvhead" stop --config "$TMP/head.yaml" 2>"$TMP/stop2.err" && fail "stop with no head running exited 0"
assert_grep "$TMP/stop2.err" "no running head"
pass "daemon mode and stop"
