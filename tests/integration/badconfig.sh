#!/bin/sh
# A bad config gives a FILE:LINE:COL error naming the key and value, exit status 2, and nothing
# starts (no data directory is created).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
printf 'listen: 127.0.0.1:0\ndata_dir: %s/data\nheartbeat_ms: fast\n' "$TMP" >"$TMP/bad.yaml"
"$BIN/hvhead" start --config "$TMP/bad.yaml" >"$TMP/h.out" 2>"$TMP/h.err"
ec=$?
[ $ec -eq 2 ] || fail "hvhead exited $ec on a bad config, want 2"
assert_grep "$TMP/h.err" "bad.yaml:3:15: key 'heartbeat_ms': value 'fast' is not an integer"
[ ! -e "$TMP/data" ] || fail "a data directory was created for a bad config"
printf 'listen: 127.0.0.1:0\nheartbeet_ms: 100\n' >"$TMP/typo.yaml"
"$BIN/hvhead" start --config "$TMP/typo.yaml" 2>"$TMP/h2.err"; ec=$?
[ $ec -eq 2 ] || fail "unknown key: exit $ec, want 2"
assert_grep "$TMP/h2.err" "typo.yaml:2:1: unknown key 'heartbeet_ms'"
printf 'listen: [unclosed\n' >"$TMP/syntax.yaml"
"$BIN/hvhead" start --config "$TMP/syntax.yaml" 2>"$TMP/h3.err"; ec=$?
[ $ec -eq 2 ] || fail "syntax error: exit $ec, want 2"
assert_grep "$TMP/h3.err" "syntax.yaml:[0-9]*:[0-9]*:"
"$BIN/hvhead" start --config "$TMP/missing.yaml" 2>"$TMP/h4.err"; ec=$?
[ $ec -eq 2 ] || fail "missing file: exit $ec, want 2"
assert_grep "$TMP/h4.err" "missing.yaml"
pass "bad configs rejected with file:line:col and exit 2"
