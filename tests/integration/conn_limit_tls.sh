#!/bin/sh
# The connection bounds hold with TLS on (the reason they sit under gRPC, at accept: gRPC core
# 1.51 cannot take sockets accepted by hv when TLS is on). Bounds 2 per client address, 3 in all;
# holders make real TLS handshakes (ALPN h2) and their HTTP/2 setup:
#  - the 3rd from 127.0.0.2 is closed at once, while hvctl over TLS (127.0.0.1) still works;
#  - once 3 are open in all, hvctl over TLS is refused, and says the TLS handshake failed and
#    that the head may be at its connection limit (exit 69); HV-CONN-LIMIT is logged.
# Skipped (77) without openssl. The plain-text case, the metrics and recovery: conn_limit.sh.
. "$HV_SRC_DIR/tests/lib.sh"
command -v openssl >/dev/null 2>&1 || { echo "SKIP: no openssl command"; exit 77; }
HOLD="/usr/bin/python3 $HV_SRC_DIR/tests/tools/conn_hold.py"
hv_setup
C=$TMP/pki
sh "$HV_SRC_DIR/tests/make_certs.sh" "$C" >"$TMP/certs.out" 2>&1 || fail "cannot make certificates: $(cat "$TMP/certs.out")"
start_head "tls:" "  cert: $C/server.pem" "  key: $C/server.key" \
    "limits:" "  max_connections: 3" "  max_connections_per_client: 2"

timeout 30 $HOLD "$HEAD" 127.0.0.2 3 20 "$C/ca.pem" >"$TMP/a.out" 2>&1 &
A=$!
PIDS="$PIDS $A"
wait_for 15 grep -q '^open' "$TMP/a.out" || fail "the TLS holder from 127.0.0.2 did not report: $(cat "$TMP/a.out")"
assert_grep "$TMP/a.out" "open 2 closed 1" "the head did not hold 2 TLS connections from 127.0.0.2 and refuse the 3rd: $(cat "$TMP/a.out")"
timeout 10 "$BIN/hvctl" --head "$HEAD" --ca "$C/ca.pem" status >"$TMP/st1.out" 2>&1 \
    || fail "hvctl status over TLS failed while 127.0.0.2 is at its bound: $(cat "$TMP/st1.out")"

sleep 0.3 # the head closes hvctl's connection once it sees it end
timeout 30 $HOLD "$HEAD" 127.0.0.3 1 20 "$C/ca.pem" >"$TMP/b.out" 2>&1 &
B=$!
PIDS="$PIDS $B"
wait_for 15 grep -q '^open' "$TMP/b.out" || fail "the TLS holder from 127.0.0.3 did not report: $(cat "$TMP/b.out")"
assert_grep "$TMP/b.out" "open 1 closed 0" "the last place in all was not given: $(cat "$TMP/b.out")"
timeout 20 "$BIN/hvctl" --head "$HEAD" --ca "$C/ca.pem" status >"$TMP/st2.out" 2>&1
rc=$?
[ "$rc" -eq 69 ] || fail "hvctl status over TLS with 3 connections open in all exited $rc, want 69: $(cat "$TMP/st2.out")"
assert_grep "$TMP/st2.out" "TLS handshake with the head failed" "hvctl did not say what failed: $(cat "$TMP/st2.out")"
assert_grep "$TMP/st2.out" "connection limit" "hvctl did not name the likely cause: $(cat "$TMP/st2.out")"
assert_grep "$TMP/head.err" "HV-CONN-LIMIT.*refused a connection from 127.0.0.2: it holds 2, limit 2 per client"
kill "$A" "$B"
wait "$A" "$B" 2>/dev/null
wait_for 10 timeout 5 "$BIN/hvctl" --head "$HEAD" --ca "$C/ca.pem" status >/dev/null 2>&1 \
    || fail "hvctl status over TLS does not work after the holders closed"
pass "TLS connections bounded per client address (2) and in all (3) at accept"
