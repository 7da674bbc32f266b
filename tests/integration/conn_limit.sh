#!/bin/sh
# The head bounds the connections it holds, per client address and in all (limits.max_connections
# 12, max_connections_per_client 8 here). Holders are real TCP connections that did their HTTP/2
# setup, from 127.0.0.2 and 127.0.0.3 (loopback addresses other than hvctl's 127.0.0.1):
#  - the 9th from 127.0.0.2 is closed by the head at once, while hvctl (127.0.0.1) still works;
#  - once 9 are open in all (12 less the 3 kept for nodes' addresses, and no node called from
#    here: conn_node_share.sh shows an agent coming back), a new one from 127.0.0.3 and hvctl's
#    are refused, and hvctl says the head closed the connection during setup, that it may be at
#    its limit;
#  - the head logs HV-CONN-LIMIT with the peer and the bound, and counts the refusals and the
#    open connections in /metrics (whose own listener is not bounded by the gate);
#  - once the holders close, hvctl works again.
. "$HV_SRC_DIR/tests/lib.sh"
HOLD="/usr/bin/python3 $HV_SRC_DIR/tests/tools/conn_hold.py"
hv_setup
MPORT=$(free_port)
start_head "limits:" "  max_connections: 12" "  max_connections_per_client: 8" \
    "metrics:" "  listen: 127.0.0.1:$MPORT"
assert_grep "$TMP/head.err" "connections at most 12 in all and 8 per client address, the last 3 kept for nodes' addresses"
metric() { curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" | awk -v k="$1" '$1 == k {print $2}'; }

# 9 from 127.0.0.2: 8 held, the 9th closed at once.
timeout 30 $HOLD "$HEAD" 127.0.0.2 9 25 >"$TMP/a.out" 2>&1 &
A=$!
PIDS="$PIDS $A"
wait_for 15 grep -q '^open' "$TMP/a.out" || fail "the holder from 127.0.0.2 did not report: $(cat "$TMP/a.out")"
assert_grep "$TMP/a.out" "open 8 closed 1" "the head did not hold 8 connections from 127.0.0.2 and refuse the 9th: $(cat "$TMP/a.out")"
timeout 10 "$BIN/hvctl" --head "$HEAD" status >"$TMP/st1.out" 2>&1 \
    || fail "hvctl status from another address failed while 127.0.0.2 is at its bound: $(cat "$TMP/st1.out")"

# 5 from 127.0.0.3: 1 fills the 9 that an address no node called from may take, the other 4
# are refused; so is hvctl's.
sleep 0.3 # the head closes hvctl's connection once it sees it end
timeout 30 $HOLD "$HEAD" 127.0.0.3 5 25 >"$TMP/b.out" 2>&1 &
B=$!
PIDS="$PIDS $B"
wait_for 15 grep -q '^open' "$TMP/b.out" || fail "the holder from 127.0.0.3 did not report: $(cat "$TMP/b.out")"
assert_grep "$TMP/b.out" "open 1 closed 4" "the head did not fill the 9 and refuse the rest: $(cat "$TMP/b.out")"
timeout 20 "$BIN/hvctl" --head "$HEAD" status >"$TMP/st2.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "hvctl status succeeded with 9 connections open and 3 kept for nodes"
[ "$rc" -ne 124 ] || fail "hvctl status hung on a refused connection"
assert_grep "$TMP/st2.out" "closed the connection during setup" "hvctl did not say why: $(cat "$TMP/st2.out")"
assert_grep "$TMP/st2.out" "connection limit" "hvctl did not name the likely cause: $(cat "$TMP/st2.out")"
echo "hvctl exit $rc: $(cat "$TMP/st2.out")"

# The log and the metrics (the metrics listener is not a gRPC port: it answers).
assert_grep "$TMP/head.err" "HV-CONN-LIMIT.*refused a connection from 127.0.0.2: it holds 8, limit 8 per client"
wait_for 6 grep -q "HV-CONN-LIMIT.*9 open, limit 12 in all.*the last 3 are kept for nodes' addresses" "$TMP/head.err" \
    || fail "no HV-CONN-LIMIT line for the bound in all (rate-limited to one per 5 s)"
[ "$(metric hv_connections_open)" = 9 ] || fail "hv_connections_open is '$(metric hv_connections_open)', not 9"
client=$(metric 'hv_connections_refused_total{limit="client"}')
total=$(metric 'hv_connections_refused_total{limit="total"}')
[ "${client:-0}" -ge 1 ] && [ "${total:-0}" -ge 2 ] \
    || fail "refusals counted client=$client total=$total, want >= 1 and >= 2"

# The holders go: the head serves hvctl again.
kill "$A" "$B"
wait "$A" "$B" 2>/dev/null
wait_for 10 timeout 5 "$BIN/hvctl" --head "$HEAD" status >/dev/null 2>&1 \
    || fail "hvctl status does not work after the holders closed"
wait_for 5 sh -c "[ \"\$(curl -s --max-time 5 http://127.0.0.1:$MPORT/metrics | awk '\$1 == \"hv_connections_open\" {print \$2}')\" -le 1 ]" \
    || fail "hv_connections_open did not fall after the holders closed: $(metric hv_connections_open)"
kill -0 "$HEAD_PID" || fail "the head died"
pass "connections bounded per client address (8) and in all (12, the last 3 kept for nodes); refused ones closed at accept; served again after"
