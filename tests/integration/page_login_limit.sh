#!/bin/sh
# Guessing status page logins is slow (issue 24: 3,716 guesses/s were measured). The head's
# listener has a token, so the page asks browsers to log in. From 127.0.0.1, 60 wrong tokens as
# fast as curl sends them: the first 5 are refused (403), then the address waits (429 with
# Retry-After, its token not even looked at) from 1 s, doubling; the right token from that
# address waits too, while 127.0.0.2 logs in at once; after its wait 127.0.0.1 logs in, and a
# good login forgets its wrong tokens.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
MPORT=$(free_port)
printf 'metrics-s3cret-token\n' >"$TMP/metrics.token"
chmod 600 "$TMP/metrics.token"
start_head "metrics:" "  listen: 127.0.0.1:$MPORT" "  token_file: $TMP/metrics.token"
CLIENT_TOKEN=$(cat "$TMP/data/client.token")
LOGIN=http://127.0.0.1:$MPORT/login
login() { # NAME SOURCE TOKEN: the status of one login attempt
    curl -s --max-time 5 --interface "$2" -D "$TMP/$1.hdr" -o "$TMP/$1.body" -w '%{http_code}' \
        --data-urlencode "token=$3" "$LOGIN"
}

: >"$TMP/codes"
i=0
t0=$(date +%s)
while [ $i -lt 60 ]; do
    login guess 127.0.0.1 "hvc_wrong$i" >>"$TMP/codes"
    echo >>"$TMP/codes"
    i=$((i + 1))
done
took=$(($(date +%s) - t0))
n403=$(grep -c '^403$' "$TMP/codes")
n429=$(grep -c '^429$' "$TMP/codes")
echo "60 wrong tokens in ${took} s: $n403 looked at (403), $n429 told to wait (429)"
# The sixth wrong token starts a 1 s wait, the next 2 s, 4 s...: within T s at most
# 6 + log2(T + 1) (rounded up) are looked at.
most=6
s=1
while [ $s -le $((took + 1)) ]; do most=$((most + 1)); s=$((s * 2)); done
[ "$n403" -ge 6 ] && [ "$n403" -le $most ] || fail "want 6 to $most wrong tokens looked at in $took s, got $n403: $(tr '\n' ' ' <"$TMP/codes")"
[ $((n403 + n429)) -eq 60 ] || fail "other answers than 403 and 429: $(sort "$TMP/codes" | uniq -c)"
assert_grep "$TMP/guess.hdr" "^Retry-After: [0-9]"
assert_grep "$TMP/guess.body" "Too many wrong tokens from your address: try again in [0-9]* s."
assert_grep "$TMP/head.err" "HV-PAGE-LOGIN-REFUSED: status page: login from ipv4:127.0.0.1:[0-9]* refused: not a client token of this head; its next login is tried in 1 s at the earliest"

# The right token from the waiting address waits too; another address is not held back.
[ "$(login good1 127.0.0.1 "$CLIENT_TOKEN")" = 429 ] || fail "a waiting address must wait, whatever its token"
[ "$(login good2 127.0.0.2 "$CLIENT_TOKEN")" = 303 ] || fail "another address must log in at once"
assert_grep "$TMP/good2.hdr" "^Set-Cookie: hv_session="
# After its wait (Retry-After), the right token logs 127.0.0.1 in and forgets its wrong tokens.
wait_s=$(sed -n 's/^Retry-After: \([0-9]*\).*/\1/p' "$TMP/good1.hdr")
[ -n "$wait_s" ] && [ "$wait_s" -le 40 ] || fail "Retry-After must say a wait within 40 s: '$wait_s'"
sleep "$wait_s"
wait_for 5 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --interface 127.0.0.1 --max-time 5 --data-urlencode 'token=$CLIENT_TOKEN' '$LOGIN')\" = 303 ]" \
    || fail "the right token after the wait must log in"
[ "$(login after 127.0.0.1 hvc_wrong_again)" = 403 ] || fail "a good login must forget the wrong tokens"
assert_no_grep "$TMP/head.err" "$CLIENT_TOKEN" "a token reached the head's log"
pass "page logins: 5 free wrong tokens per address, then waits from 1 s doubling; others unaffected"
