#!/bin/sh
# The connections kept for nodes (issue 24, "Risks to close while here": the per-address bound
# is half of the bound in all, so two addresses at their bounds locked everyone out, agents
# re-connecting included; docs/security.md "Resource bounds"). limits.max_connections 12 and
# max_connections_per_client 8: the last 3 (a quarter) are kept for addresses a node has called
# from with its node credential. node-a joins from 127.0.0.1 (its Session notes the address),
# then its agent is killed. 127.0.0.2 holds 8 connections and 127.0.0.3 asks for 5: it gets 1
# (9 open in all) and the head logs HV-CONN-LIMIT saying the rest is kept for nodes' addresses.
# node-a's agent, started again (a new connection, Join and Session from 127.0.0.1), joins and
# runs a job; hvctl from 127.0.0.1 (the nodes' address: one machine is one client) works too.
# Before the fix 127.0.0.3 took the last 4 places and the agent could not come back.
. "$HV_SRC_DIR/tests/lib.sh"
HOLD="/usr/bin/python3 $HV_SRC_DIR/tests/tools/conn_hold.py"
hv_setup
# (handshake_timeout_ms: the holders' connections stay for their 30 s, not the default 10 s)
start_head "limits:" "  max_connections: 12" "  max_connections_per_client: 8" \
    "  handshake_timeout_ms: 60000"
assert_grep "$TMP/head.err" "connections at most 12 in all and 8 per client address, the last 3 kept for nodes' addresses"
start_agent node-a 1
kill "$(agent_pid node-a)"
wait_for 10 sh -c "! kill -0 $(agent_pid node-a)" || fail "the agent did not stop"
sleep 0.3 # its connection closed: the head finds it at the next refusal that looks

timeout 40 $HOLD "$HEAD" 127.0.0.2 8 30 >"$TMP/a.out" 2>&1 &
A=$!
PIDS="$PIDS $A"
wait_for 15 grep -q '^open' "$TMP/a.out" || fail "the holder from 127.0.0.2 did not report: $(cat "$TMP/a.out")"
assert_grep "$TMP/a.out" "open 8 closed 0" "127.0.0.2 did not get its 8: $(cat "$TMP/a.out")"
timeout 40 $HOLD "$HEAD" 127.0.0.3 5 30 >"$TMP/b.out" 2>&1 &
B=$!
PIDS="$PIDS $B"
wait_for 15 grep -q '^open' "$TMP/b.out" || fail "the holder from 127.0.0.3 did not report: $(cat "$TMP/b.out")"
echo "127.0.0.2: $(cat "$TMP/a.out"); 127.0.0.3: $(cat "$TMP/b.out")"
assert_grep "$TMP/b.out" "open 1 closed 4" "127.0.0.3 took places kept for nodes: $(cat "$TMP/b.out")"
wait_for 6 grep -q "HV-CONN-LIMIT.*refused a connection from 127.0.0.3: 9 open, limit 12 in all.*the last 3 are kept for nodes' addresses" "$TMP/head.err" \
    || fail "no HV-CONN-LIMIT line for the nodes' share"

# The agent comes back from the nodes' address while both holders hold on (before the fix it
# was refused until the holders let go).
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name node-a --slots 1 --work-dir "$TMP/agent-node-a" \
    >"$TMP/agent-back.out" 2>"$TMP/agent-back.err" &
PIDS="$PIDS $!"
wait_for 10 grep -q 'joined' "$TMP/agent-back.out" || fail "the agent could not come back within 10 s"
"$BIN/hvsubmit" --head "$HEAD" -np 1 "$EX/hello" >"$TMP/s.out" 2>&1 || fail "a job on the agent that came back failed"
assert_grep "$TMP/s.out" "hello from rank 0 of 1"
timeout 10 "$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.out" 2>&1 || fail "hvctl from the nodes' address was refused"
assert_grep "$TMP/nodes.out" "node-a.*alive"
kill -0 "$A" && kill -0 "$B" || fail "a holder ended early: the places were not all held"
kill "$A" "$B"
kill -0 "$HEAD_PID" || fail "the head died"
pass "with 12 in all, 8 per address and 3 kept for nodes: two addresses held 9, the agent came back and ran a job"
