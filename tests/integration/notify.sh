#!/bin/sh
# systemd's Type=notify protocol through the real binaries, with a python stand-in for the
# manager's datagram socket (systemd itself does not run here): hvhead says READY=1 once it
# answers `hvctl status` (listening, state replayed), sends STATUS= lines with its nodes and jobs,
# pings WATCHDOG=1 at half WATCHDOG_USEC, and STOPPING=1 on SIGTERM; hvagent says READY=1 once
# the head lists it alive, and STOPPING=1 with "draining" when SIGTERM starts its drain. The
# manager's variables do not reach the workers. A restarted head says READY=1 only with its
# stored nodes replayed.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
PY=/usr/bin/python3
LISTEN="$HV_SRC_DIR/tests/tools/notify_listen.py"
port=$(free_port)
HV_LISTEN=127.0.0.1:$port write_config "$TMP/head.yaml"
HEAD=127.0.0.1:$port
export HV_HEAD=$HEAD

# The head's manager: on READY=1 it runs `hvctl status` at once.
$PY "$LISTEN" "$TMP/head.sock" "$TMP/head.notify" "$BIN/hvctl" --head "$HEAD" status &
PIDS="$PIDS $!"
wait_for 10 test -f "$TMP/head.notify" || fail "the notify listener did not start"
NOTIFY_SOCKET=$TMP/head.sock WATCHDOG_USEC=1000000 "$BIN/hvhead" start --config "$TMP/head.yaml" \
    >"$TMP/head.out" 2>"$TMP/head.err" &
HEAD_PID=$!
PIDS="$PIDS $HEAD_PID"
wait_for 15 grep -q '^msg READY=1' "$TMP/head.notify" || fail "hvhead sent no READY=1"
wait_for 15 grep -q '^ready-check' "$TMP/head.notify" || fail "the ready check did not run"
assert_grep "$TMP/head.notify" '^ready-check rc=0 ' \
    "hvctl status failed at the moment hvhead said READY=1"
assert_grep "$TMP/head.notify" '^msg READY=1|STATUS=test:[0-9]*: nodes 0 alive, 0 draining, 0 dead; jobs 0 running, 0 pending$' \
    "READY=1 should carry the status line"
# WATCHDOG_USEC=1 s: a ping every half second or so.
wait_for 5 lines_at_least "$TMP/head.notify" '^msg WATCHDOG=1$' 3 || fail "hvhead sent fewer than 3 WATCHDOG=1"

# The agent's manager: on READY=1 it lists the nodes.
$PY "$LISTEN" "@hv-notify-agent-$$" "$TMP/agent.notify" "$BIN/hvctl" --head "$HEAD" nodes &
PIDS="$PIDS $!"
wait_for 10 test -f "$TMP/agent.notify" || fail "the agent's notify listener did not start"
NOTIFY_SOCKET=@hv-notify-agent-$$ start_agent node-a 1
wait_for 10 grep -q '^ready-check' "$TMP/agent.notify" || fail "hvagent sent no READY=1"
assert_grep "$TMP/agent.notify" '^msg READY=1|STATUS=joined .* as node node-a (id [0-9]*), 1 slots$'
assert_grep "$TMP/agent.notify" '^ready-check rc=0 .*node-a *[0-9]* *alive' \
    "the head did not list node-a alive when hvagent said READY=1"
# The head's periodic status line counts the node (every 5 s).
wait_for 12 grep -q '^msg STATUS=test:[0-9]*: nodes 1 alive, 0 draining, 0 dead' "$TMP/head.notify" \
    || fail "hvhead's STATUS= line did not show the node"

# A worker does not inherit the manager's socket (it would speak for the agent).
"$BIN/hvsubmit" -np 1 /usr/bin/env >"$TMP/submit.out" 2>"$TMP/submit.err" || fail "hvsubmit exited $?"
assert_grep "$TMP/submit.out" '^\[0\]<stdout>:HV_RANK=0$' "the env job printed no environment"
assert_no_grep "$TMP/submit.out" 'NOTIFY_SOCKET\|WATCHDOG_' "a worker saw the manager's variables"

# SIGTERM: the agent drains (STOPPING=1), the head stops (STOPPING=1).
kill -TERM "$(agent_pid node-a)"
wait_for 10 grep -q '^msg STOPPING=1|STATUS=draining: 0 workers' "$TMP/agent.notify" \
    || fail "hvagent sent no STOPPING=1 when SIGTERM started its drain"
kill -TERM "$HEAD_PID"
wait_for 10 grep -q '^msg STOPPING=1|STATUS=stopping (SIGTERM)' "$TMP/head.notify" \
    || fail "hvhead sent no STOPPING=1 on SIGTERM"
# A restart: READY=1 comes after the stored state is replayed, so its status line counts the
# node the first run knew (node-a, draining when the head stopped).
wait_for 10 sh -c "! kill -0 $HEAD_PID 2>/dev/null" || fail "hvhead did not stop on SIGTERM"
NOTIFY_SOCKET=$TMP/head.sock "$BIN/hvhead" start --config "$TMP/head.yaml" \
    >>"$TMP/head.out" 2>>"$TMP/head.err" &
HEAD_PID=$!
PIDS="$PIDS $HEAD_PID"
wait_for 15 lines_at_least "$TMP/head.notify" '^msg READY=1' 2 || fail "the restarted hvhead sent no READY=1"
grep '^msg READY=1' "$TMP/head.notify" | tail -n 1 >"$TMP/ready2"
assert_no_grep "$TMP/ready2" 'nodes 0 alive, 0 draining, 0 dead' \
    "the restarted head said READY=1 before it replayed its nodes: $(cat "$TMP/ready2")"
pass "READY=1, STATUS=, WATCHDOG=1 and STOPPING=1 from hvhead and hvagent"
