#!/bin/sh
# A bad client token file never freezes revocation (issue "Hardening", item 6): while a malformed
# file sits in DATA/clients/, a deleted token stops working within the reload period (2 s), and so
# does the token of a file that was emptied. The bad file is named in one warning (not one per
# reload), its content never; the head's own client token keeps working throughout.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
D=$TMP/data
mkdir -p "$D/clients"
for n in ci ops; do
    echo "hvc_$n-runner-0123456789abcdef" >"$TMP/$n.token"; chmod 600 "$TMP/$n.token"
    cp "$TMP/$n.token" "$D/clients/$n.token"
done
ok() { "$BIN/hvctl" --token-file "$TMP/$1.token" jobs; }
refused() { ! ok "$1"; }
wait_for 5 ok ci || fail "a token in clients/ was not accepted"
wait_for 5 ok ops || fail "a second token in clients/ was not accepted"

# A malformed file, then a revocation by deleting a file: the revocation still happens.
echo "password123 not-a-token" >"$D/clients/bad.token"
sleep 0.5
rm "$D/clients/ci.token"
t0=$(date +%s%N)
wait_for 3 refused ci || fail "a deleted client token still works while clients/bad.token is malformed"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -le $((2500 * T_MULT)) ] || fail "revocation took $ms ms (want at most 2 s and a poll)"
"$BIN/hvctl" --token-file "$TMP/ci.token" jobs 2>"$TMP/ci.err" && fail "the deleted token was accepted"
assert_grep "$TMP/ci.err" "not authenticated"

# Emptying a token file revokes its token too.
: >"$D/clients/ops.token"
wait_for 3 refused ops || fail "an emptied token file kept its old token"
ok ops 2>/dev/null && fail "the emptied file's token was accepted"

# The head's own token is untouched; the bad files are said once each, by name, never by value.
"$BIN/hvctl" jobs >/dev/null 2>&1 || fail "the head's client token stopped working"
sleep 2.5
[ "$(grep -c 'clients/bad.token ignored' "$TMP/head.err")" -eq 1 ] \
    || fail "want one warning naming clients/bad.token: $(grep -c 'bad.token' "$TMP/head.err")"
assert_grep "$TMP/head.err" "clients/ops.token ignored" "the emptied file must be named"
assert_no_grep "$TMP/head.err" "password123" "a token file's content reached the log"
# Fixed again: the file's token works again.
cp "$TMP/ops.token" "$D/clients/ops.token"
wait_for 3 ok ops || fail "a repaired token file was not picked up"
pass "bad or emptied client token files never keep a revoked token alive"
