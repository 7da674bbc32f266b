#!/bin/sh
# IPv6 end to end: a head listening on [::1] says so with brackets (ready line, advertised
# address), an agent joins it, and a 2-worker job runs with its data plane on IPv6 (each worker
# reports "data plane [::1]:PORT"). Skipped where the machine has no IPv6 loopback.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
if ! ip -6 addr show dev lo 2>/dev/null | grep -q 'inet6 ::1/128'; then
    echo "SKIP: no IPv6 loopback"
    exit 77
fi
HV_LISTEN='"[::1]:0"' start_head
assert_grep "$TMP/head.out" 'listening on \[::1\]:[0-9]* (cluster test, advertised \[::1\]:[0-9]*,'
case "$HEAD" in "[::1]:"*) ;; *) fail "the head's address is '$HEAD', not [::1]:PORT" ;; esac
start_agent node-a 2
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.out" 2>&1 || fail "hvctl over IPv6 failed"
assert_grep "$TMP/nodes.out" "node-a"
"$BIN/hvsubmit" --head "$HEAD" --env HV_LOG_LEVEL=info -np 2 "$EX/hello" >"$TMP/s.out" 2>&1 ||
    fail "a 2-worker job over IPv6 failed: $(tail -n 20 "$TMP/s.out")"
assert_grep "$TMP/s.out" "hello from rank 0 of 2"
assert_grep "$TMP/s.out" "hello from rank 1 of 2"
[ "$(grep -c 'data plane \[::1\]:[0-9]' "$TMP/s.out")" -eq 2 ] ||
    fail "the workers' data plane is not on IPv6: $(grep 'data plane' "$TMP/s.out")"
pass "IPv6: bracketed addresses, agent join, 2 workers with IPv6 data addresses"
