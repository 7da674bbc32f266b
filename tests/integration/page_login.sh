#!/bin/sh
# The status page's login beyond loopback (docs/status-page.md "Access"): the head runs in a
# network namespace this test creates, its metrics listener on 10.203.0.1 (one end of a veth
# pair there: not loopback, so the page needs a login). Without a session cookie the page redirects to
# /login; a wrong token (or the metrics token) is refused; a client token sets an HttpOnly,
# SameSite=Strict cookie that is not the token, and the page is served with it; /metrics still
# needs its bearer token; logout ends the session; deleting a client token file ends the sessions
# logged in with it. No token reaches the head's output. Skipped (77) where ip netns is not
# permitted.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
NS=hvpl$$
netns_cleanup() {
    ip netns pids $NS 2>/dev/null | xargs -r kill -KILL
    ip netns del $NS 2>/dev/null
    hv_cleanup
}
trap netns_cleanup EXIT
if ! ip netns add $NS 2>/dev/null; then echo "SKIP: ip netns is not permitted here"; exit 77; fi
ip -n $NS link set lo up
ip -n $NS link add v0 type veth peer name v1 && ip -n $NS addr add 10.203.0.1/24 dev v0 &&
    ip -n $NS link set v0 up && ip -n $NS link set v1 up || fail "cannot set up the veth pair"
PAGE=http://10.203.0.1:7001

printf 'metrics-s3cret-token\n' >"$TMP/metrics.token"
chmod 600 "$TMP/metrics.token"
mkdir -p "$TMP/data/clients"
CI_TOKEN=hvc_ci0123456789abcdef0123456789
printf '%s\n' "$CI_TOKEN" >"$TMP/data/clients/ci.token"
chmod 600 "$TMP/data/clients/ci.token"
write_config "$TMP/head.yaml" "metrics:" "  listen: 10.203.0.1:7001" "  token_file: $TMP/metrics.token"
ip netns exec $NS "$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/head.out" 2>"$TMP/head.err" &
PIDS="$PIDS $!"
wait_for 10 grep -q 'listening on' "$TMP/head.out" || { cat "$TMP/head.err" >&2; fail "head did not start"; }
CLIENT_TOKEN=$(cat "$TMP/data/client.token")

# curl in the namespace: -D the response head, -o the body, -w the status.
req() { # NAME [curl args...]
    local name=$1; shift
    ip netns exec $NS curl -s --max-time 5 -D "$TMP/$name.hdr" -o "$TMP/$name.body" -w '%{http_code}' "$@"
}

[ "$(req anon "$PAGE/")" = 303 ] || fail "the page without a cookie must redirect (303)"
assert_grep "$TMP/anon.hdr" '^Location: /login' "the redirect must lead to the login page"
[ "$(req anonjob "$PAGE/job/1")" = 303 ] || fail "a job page without a cookie must redirect"
[ "$(req form "$PAGE/login")" = 200 ] || fail "the login form must be served"
assert_grep "$TMP/form.body" 'name="token"' "the login page must hold the form"

[ "$(req wrong --data-urlencode "token=hvc_wrong0123456789abcdef" "$PAGE/login")" = 403 ] ||
    fail "a wrong token must be refused (403)"
assert_no_grep "$TMP/wrong.hdr" 'Set-Cookie' "a refused login must not set a cookie"
assert_grep "$TMP/wrong.body" 'not a client token of this head' "the refusal must say why"
[ "$(req mtok --data-urlencode "token=metrics-s3cret-token" "$PAGE/login")" = 403 ] ||
    fail "the metrics token is not a login"

[ "$(req login -c "$TMP/jar" --data-urlencode "token=$CLIENT_TOKEN" "$PAGE/login")" = 303 ] ||
    fail "the client token must log in (303)"
assert_grep "$TMP/login.hdr" '^Set-Cookie: hv_session=[0-9a-f]\{64\}; HttpOnly; SameSite=Strict; Path=/; Max-Age=28800' \
    "the session cookie must be HttpOnly and SameSite=Strict"
assert_no_grep "$TMP/login.hdr" "${CLIENT_TOKEN#hvc_}" "the cookie must not hold the token"
[ "$(req page -b "$TMP/jar" "$PAGE/")" = 200 ] || fail "the page must be served with the session cookie"
assert_grep "$TMP/page.body" '<h1>' "the cluster page must be served"
assert_grep "$TMP/page.body" 'action="/logout"' "a page behind the login has the log-out button"
assert_no_grep "$TMP/page.body" "${CLIENT_TOKEN#hvc_}" "the page must not show the token"
[ "$(req jobpage -b "$TMP/jar" "$PAGE/job/1")" = 404 ] || fail "a job page past the login: 404 for an unknown job"

# /metrics keeps its bearer token: a session does not open it, the token does.
[ "$(req m1 -b "$TMP/jar" "$PAGE/metrics")" = 401 ] || fail "/metrics must still need the bearer token"
[ "$(req m2 -H "Authorization: Bearer metrics-s3cret-token" "$PAGE/metrics")" = 200 ] ||
    fail "/metrics must answer its bearer token"

# The two refused logins are counted.
ip netns exec $NS curl -s --max-time 5 -H "Authorization: Bearer metrics-s3cret-token" "$PAGE/metrics" >"$TMP/metrics.txt"
assert_grep "$TMP/metrics.txt" '^hv_auth_refusals_total{endpoint="page",code="UNAUTHENTICATED"} 2$' \
    "the refused logins must be counted"

# Logout ends the session, even for a copy of the cookie.
cp "$TMP/jar" "$TMP/jar.copy"
[ "$(req logout -b "$TMP/jar" -c "$TMP/jar" -d "" "$PAGE/logout")" = 303 ] || fail "logout must redirect"
[ "$(req after -b "$TMP/jar.copy" "$PAGE/")" = 303 ] || fail "a logged-out session must be refused"

# A token deleted from the data directory ends its sessions (the head re-reads them every 2 s).
[ "$(req ci -c "$TMP/jar2" --data-urlencode "token=$CI_TOKEN" "$PAGE/login")" = 303 ] || fail "the ci token must log in"
[ "$(req ci2 -b "$TMP/jar2" "$PAGE/")" = 200 ] || fail "the ci session must be served"
rm -f "$TMP/data/clients/ci.token"
wait_for 10 sh -c "[ \"\$(ip netns exec $NS curl -s -o /dev/null --max-time 5 -w '%{http_code}' -b '$TMP/jar2' '$PAGE/')\" = 303 ]" ||
    fail "the session of a deleted token must end"
assert_grep "$TMP/head.err" "HV-PAGE-SESSION-REVOKED" "the end of the sessions must be logged"
assert_grep "$TMP/head.err" "HV-PAGE-LOGIN-REFUSED: status page: login from ipv4:10.203.0.1:" "a refused login must be logged with its peer"
# The audit trail has the logins, the refusals and the logout, by token name, never the token.
GRPC=$(sed -n 's/.*listening on \([^ ]*\) .*/\1/p' "$TMP/head.out" | head -n 1)
ip netns exec $NS "$BIN/hvctl" --head "$GRPC" audit >"$TMP/audit.out" 2>&1 || fail "hvctl audit: $(cat "$TMP/audit.out")"
assert_grep "$TMP/audit.out" "PageLogin.*UNAUTHENTICATED" "a refused login must be audited"
assert_grep "$TMP/audit.out" "default.*PageLogin" "a login must be audited with the token's name"
assert_grep "$TMP/audit.out" "PageLogout" "a logout must be audited"
assert_no_grep "$TMP/audit.out" "${CLIENT_TOKEN#hvc_}" "the audit trail must not hold the token"

for t in "$CLIENT_TOKEN" "$CI_TOKEN" metrics-s3cret-token; do
    assert_no_grep "$TMP/head.out" "$t" "no token may be printed"
    assert_no_grep "$TMP/head.err" "$t" "no token may be logged"
done
pass "page login: redirect, refusal, HttpOnly SameSite=Strict session, logout, revocation"
