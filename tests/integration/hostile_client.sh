#!/bin/sh
# An independent client (python3-grpcio, no hv code) sends wrong credentials and hostile payloads
# to every method of the head: no credential and foreign credentials are UNAUTHENTICATED, a client
# token outside its scope PERMISSION_DENIED, garbage INVALID_ARGUMENT, nothing UNKNOWN or
# INTERNAL; a request over a size bound (a 5 MiB name, 60 KB labels, an 8 MiB chunk, a 3 MiB env
# value, 50,000 env entries) is INVALID_ARGUMENT naming the field and the bound; afterwards the
# head still serves its real clients (a job runs).
. "$HV_SRC_DIR/tests/lib.sh"
/usr/bin/python3 -c "import grpc" 2>/dev/null || { echo "SKIP: python3-grpcio is not installed"; exit 77; }
hv_setup
start_head
start_agent node-a 1
/usr/bin/python3 "$HV_SRC_DIR/tests/tools/hostile_client.py" "$HEAD" "$HV_SRC_DIR/proto/hv.proto" \
    "$HV_TOKEN_FILE" "$TOKEN" >"$TMP/hostile.out" 2>&1 || {
    grep FAIL "$TMP/hostile.out" >&2
    tail -n 3 "$TMP/hostile.out" >&2
    fail "the head answered a hostile call with the wrong status"
}
assert_grep "$TMP/hostile.out" "0 check(s) failed"
kill -0 "$HEAD_PID" || fail "the head died"
assert_no_grep "$TMP/head.err" "hvc_00000000000000000000000000000000" "a credential reached the head's log"
"$BIN/hvsubmit" --head "$HEAD" -np 1 "$EX/hello" >"$TMP/s.out" 2>&1 || fail "a job after the hostile client failed"
assert_grep "$TMP/s.out" "hello from rank 0 of 1"
pass "$(grep -c '^ok' "$TMP/hostile.out") hostile calls answered as promised; the head still serves"
