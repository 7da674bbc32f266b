#!/bin/sh
# The audit trail and join tokens (issue 16, section 6):
#  - submit, cancel, drain and a call with a bad client token each leave an audit entry with who
#    and the result; --refused shows only the refusal; no secret is in the trail or the head log.
#  - hvctl token create --ttl 2s --uses 1: one agent joins with it, a second is refused (used
#    up), and after the expiry it is refused as expired; token list shows no secret; a revoked
#    token admits nobody.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 1
CT=$(cat "$TMP/data/client.token")

"$BIN/hvsubmit" -d -np 1 --name audited /bin/sleep 30 >/dev/null 2>"$TMP/submit.err" \
    || fail "submit: $(cat "$TMP/submit.err")"
"$BIN/hvctl" cancel 1 >/dev/null || fail "cancel"
"$BIN/hvctl" drain node-a --reason audit-test >/dev/null || fail "drain"
echo hvc_not-a-real-token-0123456789 >"$TMP/bad.token"
chmod 600 "$TMP/bad.token"
"$BIN/hvctl" --token-file "$TMP/bad.token" jobs >/dev/null 2>&1 && fail "a bad client token was accepted"

"$BIN/hvctl" audit >"$TMP/audit.txt" || fail "hvctl audit"
for m in Submit Cancel DrainNode Join; do
    grep -E "client default|join-token static" "$TMP/audit.txt" | grep -q " $m " \
        || fail "no $m entry with who in: $(cat "$TMP/audit.txt")"
done
grep " Cancel " "$TMP/audit.txt" | grep -q "job 1 .*OK" || fail "cancel entry lacks target/result"
grep " ListJobs " "$TMP/audit.txt" | grep -q "none .*UNAUTHENTICATED" \
    || fail "the refused ListJobs is not in the trail: $(cat "$TMP/audit.txt")"
"$BIN/hvctl" audit --refused >"$TMP/refused.txt" || fail "hvctl audit --refused"
assert_grep "$TMP/refused.txt" "ListJobs"
assert_no_grep "$TMP/refused.txt" "Submit" "--refused showed an accepted call"
[ "$("$BIN/hvctl" audit --limit 3 | wc -l)" -eq 4 ] || fail "audit --limit 3 is not 3 entries"
"$BIN/hvctl" audit --method Cancel --who default >"$TMP/cancel.txt" || fail "audit --method"
[ "$(grep -c ' Cancel ' "$TMP/cancel.txt")" -eq 1 ] && assert_no_grep "$TMP/cancel.txt" Submit

# Join tokens
"$BIN/hvctl" token create --ttl 2s --uses 1 >"$TMP/jt.out" 2>"$TMP/jt.err" || fail "token create"
JT=$(cat "$TMP/jt.out")
JID=$(echo "$JT" | sed -nE 's/^hvj_([a-z0-9]{6})\.[0-9a-f]{32}$/\1/p')
[ -n "$JID" ] || fail "token create printed '$JT'"
SECRET=${JT#hvj_$JID.}
HV_TOKEN=$JT "$BIN/hvagent" join "$HEAD" --name node-b --slots 1 --work-dir "$TMP/agent-node-b" \
    >"$TMP/agent-node-b.out" 2>"$TMP/agent-node-b.err" &
PIDS="$PIDS $!"
wait_for 15 grep -q joined "$TMP/agent-node-b.out" || fail "node-b did not join with the join token"
HV_TOKEN=$JT timeout 20 "$BIN/hvagent" join "$HEAD" --name node-c --slots 1 \
    --work-dir "$TMP/agent-node-c" >"$TMP/c.out" 2>"$TMP/c.err" && fail "node-c joined twice-used token"
assert_grep "$TMP/c.err" "join token $JID is used up"
"$BIN/hvctl" token list >"$TMP/list.txt" || fail "token list"
grep "$JID" "$TMP/list.txt" | grep -q "used up" || fail "token list: $(cat "$TMP/list.txt")"
grep -q "1/1" "$TMP/list.txt" || fail "token list shows no uses: $(cat "$TMP/list.txt")"
"$BIN/hvctl" --json token list >"$TMP/list.json" || fail "token list --json"
"$BIN/hvhead" token list >"$TMP/list2.txt" || fail "hvhead token list"
grep -q "$JID" "$TMP/list2.txt" || fail "hvhead token list: $(cat "$TMP/list2.txt")"
sleep 2
HV_TOKEN=$JT timeout 20 "$BIN/hvagent" join "$HEAD" --name node-d --slots 1 \
    --work-dir "$TMP/agent-node-d" >"$TMP/d.out" 2>"$TMP/d.err" && fail "an expired token admitted node-d"
assert_grep "$TMP/d.err" "join token $JID is expired"

"$BIN/hvctl" token create >"$TMP/jt2.out" 2>/dev/null || fail "token create (no limits)"
JT2=$(cat "$TMP/jt2.out")
JID2=$(echo "$JT2" | cut -c5-10)
"$BIN/hvctl" token revoke "$JID2" >"$TMP/rev.out" || fail "token revoke"
assert_grep "$TMP/rev.out" "join token $JID2 revoked"
HV_TOKEN=$JT2 timeout 20 "$BIN/hvagent" join "$HEAD" --name node-e --slots 1 \
    --work-dir "$TMP/agent-node-e" >"$TMP/e.out" 2>"$TMP/e.err" && fail "a revoked token admitted node-e"
assert_grep "$TMP/e.err" "join token $JID2 is revoked"
"$BIN/hvctl" token revoke zzzzzz 2>"$TMP/rev2.err" && fail "revoking an unknown token succeeded"
assert_grep "$TMP/rev2.err" "no join token"

# The trail names the token by id; no secret anywhere.
"$BIN/hvctl" --json audit --limit 1000 >"$TMP/audit.json" || fail "audit --json"
grep -q "\"who\": *\"$JID\"" "$TMP/audit.json" || fail "no join by token $JID in the trail"
grep -q "used up" "$TMP/audit.json" || fail "the refused join is not in the trail"
for f in "$TMP/audit.json" "$TMP/list.txt" "$TMP/list.json" "$TMP/head.out" "$TMP/head.err"; do
    for secret in "$CT" "$SECRET" "${JT2#hvj_$JID2.}" hvc_not-a-real-token "$TOKEN"; do
        assert_no_grep "$f" "$secret" "a secret is in $f"
    done
done
pass "audit trail and join tokens"
