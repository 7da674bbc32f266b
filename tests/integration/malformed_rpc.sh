#!/bin/sh
# Malformed protobuf to every method of every service (the list comes from proto/hv.proto, so a
# new method is covered without editing this test): each answers INVALID_ARGUMENT, not UNKNOWN;
# an empty request is never answered UNKNOWN or INTERNAL; and the head still serves real clients.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 1
paths=$(awk '/^service /{s=$2} /^ *rpc /{sub(/\(.*/, "", $2); print "/hvpb.v1." s "/" $2}' \
    "$HV_SRC_DIR/proto/hv.proto")
n=$(echo "$paths" | wc -l)
[ "$n" -ge 18 ] || fail "found only $n methods in proto/hv.proto"
# The Keeper service is an agent's (node-a's copy address), the rest the head's.
keeper=$(keeper_addr node-a)
[ -n "$keeper" ] || fail "node-a's agent announced no Keeper address"
# shellcheck disable=SC2086
{ "$BIN/rpc_garbage" "$HEAD" $(echo "$paths" | grep -v '[.]Keeper/') &&
    "$BIN/rpc_garbage" "$keeper" $(echo "$paths" | grep '[.]Keeper/'); } >"$TMP/garbage.out" 2>&1 || {
    cat "$TMP/garbage.out" >&2
    fail "a method answered malformed or empty input with the wrong status"
}
[ "$(grep -c ' garbage INVALID_ARGUMENT malformed request' "$TMP/garbage.out")" -eq "$n" ] ||
    fail "not every method answered INVALID_ARGUMENT: $(cat "$TMP/garbage.out")"
assert_grep "$TMP/garbage.out" "StatArtifact empty INVALID_ARGUMENT .*digest"
kill -0 "$HEAD_PID" || fail "the head died"
"$BIN/hvsubmit" --head "$HEAD" -np 1 "$EX/hello" >"$TMP/s.out" 2>&1 || fail "job after garbage failed"
assert_grep "$TMP/s.out" "hello from rank 0 of 1"
pass "malformed requests to $n methods answered INVALID_ARGUMENT; the head still serves"
