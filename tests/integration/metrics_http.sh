#!/bin/sh
# The metrics listener as a user meets it, without Prometheus:
#  1. metrics.listen beyond loopback without metrics.token_file: the config is refused (exit 2),
#     naming the key; the head does not start.
#  2. With a token file: /metrics without the token or with a wrong one is 401, with it 200;
#     an unknown path is 404, POST is 405, an oversized request head is 431, a request that
#     never ends is answered 408 within the timeout's bound (not waited for forever).
#  3. The head's gRPC still works beside it (hvctl nodes), its calls are counted by method and
#     code, a gRPC call with a bad token and the refused scrapes are counted as refusals.
#  4. A second head asking for the same metrics address fails to start and says why.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
MPORT=$(free_port)
URL="http://127.0.0.1:$MPORT/metrics"
# head_ends NAME: runs a head with $TMP/NAME.yaml (output in $TMP/NAME.out, .err) that must end by
# itself; its exit status is head_ends'.
head_ends() {
    "$BIN/hvhead" start --config "$TMP/$1.yaml" >"$TMP/$1.out" 2>"$TMP/$1.err" &
    local pid=$!
    PIDS="$PIDS $pid"
    wait "$pid"
}

write_config "$TMP/open.yaml" "metrics:" "  listen: 0.0.0.0:$MPORT"
head_ends open
rc=$?
[ "$rc" -eq 2 ] || fail "a metrics listener beyond loopback without a token must be refused with exit 2 (got $rc)"
assert_grep "$TMP/open.err" "key 'metrics.listen': value '0.0.0.0:$MPORT' is not a loopback address and there is no 'metrics.token_file'"

printf 'metrics-s3cret\n' >"$TMP/metrics.token"
chmod 600 "$TMP/metrics.token"
start_head "metrics:" "  listen: 127.0.0.1:$MPORT" "  token_file: $TMP/metrics.token"
assert_grep "$TMP/head.out" "metrics on $URL (bearer token of metrics.token_file)"
assert_no_grep "$TMP/head.out" "metrics-s3cret" "the token must not be printed"
assert_no_grep "$TMP/head.err" "metrics-s3cret" "the token must not be logged"

code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
[ "$(code "$URL")" = 401 ] || fail "/metrics without a token must be 401"
[ "$(code -H 'Authorization: Bearer wrong' "$URL")" = 401 ] || fail "/metrics with a wrong token must be 401"
AUTH='Authorization: Bearer metrics-s3cret'
[ "$(code -H "$AUTH" "$URL")" = 200 ] || fail "/metrics with the token must be 200"
[ "$(code -H "$AUTH" "http://127.0.0.1:$MPORT/nope")" = 404 ] || fail "an unknown path must be 404"
[ "$(code -H "$AUTH" -X POST "$URL")" = 405 ] || fail "POST must be 405"
[ "$(code -H "$AUTH" -H "X-Pad: $(head -c 9000 /dev/zero | tr '\0' a)" "$URL")" = 431 ] \
    || fail "a request head over 8 KiB must be 431"
# A request that never ends: answered 408 and closed 2 s after it began, not held open.
/usr/bin/python3 - "$MPORT" >"$TMP/slow.out" 2>&1 <<'PY' || fail "a request that never ends must get 408 ($(cat "$TMP/slow.out"))"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(20)
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
t = time.time()
got = s.recv(4096)
assert got.startswith(b"HTTP/1.1 408"), got
assert time.time() - t < 6, time.time() - t
PY

start_agent node-a 1
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.out" 2>&1 || fail "hvctl nodes must work beside the metrics listener"
assert_grep "$TMP/nodes.out" "node-a"
printf 'not-the-token\n' >"$TMP/bad.token"
HV_TOKEN_FILE=$TMP/bad.token "$BIN/hvctl" --head "$HEAD" nodes >"$TMP/bad.out" 2>&1 \
    && fail "hvctl with a bad token must be refused"
curl -s --max-time 5 -H "$AUTH" "$URL" >"$TMP/metrics.txt"
assert_grep "$TMP/metrics.txt" '^hv_rpcs_total{method="hvpb.v1.Jobs/ListNodes",code="OK"} 1$'
assert_grep "$TMP/metrics.txt" '^hv_rpcs_total{method="hvpb.v1.Jobs/ListNodes",code="UNAUTHENTICATED"} 1$'
assert_grep "$TMP/metrics.txt" '^hv_auth_refusals_total{endpoint="grpc",code="UNAUTHENTICATED"} 1$'
assert_grep "$TMP/metrics.txt" '^hv_auth_refusals_total{endpoint="metrics",code="UNAUTHENTICATED"} 2$'
assert_grep "$TMP/metrics.txt" '^hv_nodes{state="alive",type="manual"} 1$'
assert_grep "$TMP/metrics.txt" '^hv_slots{state="free",type="manual"} 1$'
if command -v promtool >/dev/null; then
    promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.out" 2>&1 || fail "promtool refused the exposition"
fi

mkdir -p "$TMP/data2"
write_config "$TMP/second.yaml" "metrics:" "  listen: 127.0.0.1:$MPORT"
sed -i "s|^data_dir: .*|data_dir: $TMP/data2|" "$TMP/second.yaml"
head_ends second
rc=$?
[ "$rc" -eq 1 ] || fail "a head that cannot bind its metrics address must exit 1 (got $rc)"
assert_grep "$TMP/second.err" "key 'metrics.listen': cannot listen on 127.0.0.1:$MPORT: address already in use"
pass "metrics: token, 401/404/405/431/408, gRPC beside it, refusals counted, bind failure told"
