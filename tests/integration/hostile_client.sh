#!/bin/sh
# An independent client (python3-grpcio, no hv code) sends wrong credentials and hostile payloads
# to every method of the head: no credential and foreign credentials are UNAUTHENTICATED, a client
# token outside its scope PERMISSION_DENIED, garbage INVALID_ARGUMENT, nothing UNKNOWN or
# INTERNAL; a request over a size bound (a 5 MiB name, 60 KB labels, an 8 MiB chunk, a 3 MiB env
# value, 50,000 env entries) is INVALID_ARGUMENT naming the field and the bound; afterwards the
# head still serves its real clients (a job runs). Issue 24's cases too: a job's worker secret
# (of a job on an agent with --run-as nobody, when this runs as root) cannot create an actor as
# root or on another user's node; the secret of a job that ended is UNAUTHENTICATED on every
# service; text that is not UTF-8 is INVALID_ARGUMENT naming the field, and a strict client
# (Python's protobuf) still decodes every listing.
# HTTP flood (issue 24): a client sending half a request head on as many connections as it can
# (tests/tools/http_flood.py), from one address and then from 40, does not keep curl's scrapes of
# /metrics from another address out: every one of them is answered 200.
. "$HV_SRC_DIR/tests/lib.sh"
/usr/bin/python3 -c "import grpc" 2>/dev/null || { echo "SKIP: python3-grpcio is not installed"; exit 77; }
hv_setup
chmod 755 "$TMP" # reachable by a --run-as user's workers
DROP=$TMP/drop
mkdir -m 1777 "$DROP"
start_metrics_head
leak() { # NAME: a job whose worker leaves its secret in $DROP/NAME, then waits (or not: "quick")
    cat >"$TMP/$1.sh" <<EOS
printf '%s\n' "\$HV_WORKER_SECRET" >"$DROP/$1.part" && mv "$DROP/$1.part" "$DROP/$1"
[ "$1" = quick ] || exec sleep 600
EOS
    "$BIN/hvsubmit" --head "$HEAD" -np 1 --detach --file "$TMP/$1.sh" /bin/sh "$1.sh" \
        >"$TMP/submit-$1.out" 2>&1 || fail "job $1 was not submitted"
    wait_for 20 test -s "$DROP/$1" || fail "job $1's worker did not start"
}
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    # The job runs on node-u (workers as nobody), the only node when it is placed.
    start_agent node-u 1 --run-as nobody --labels host=node-u
    leak live
    export HV_HOSTILE_LIVE_SECRET="$(cat "$DROP/live")" HV_HOSTILE_OTHER_LABEL=host=node-a
fi
start_agent node-a 1 --labels host=node-a
leak quick
wait_for 20 sh -c "'$BIN/hvctl' --head '$HEAD' jobs | grep -q succeeded" || fail "the quick job did not end"
export HV_HOSTILE_DEAD_SECRET="$(cat "$DROP/quick")"
# node-a's Keeper service (an agent's, for other nodes' state copies) gets the same calls
HV_HOSTILE_KEEPER=$(keeper_addr node-a)
[ -n "$HV_HOSTILE_KEEPER" ] || fail "node-a's agent announced no Keeper address"
export HV_HOSTILE_KEEPER
/usr/bin/python3 "$HV_SRC_DIR/tests/tools/hostile_client.py" "$HEAD" "$HV_SRC_DIR/proto/hv.proto" \
    "$HV_TOKEN_FILE" "$TOKEN" >"$TMP/hostile.out" 2>&1 || {
    grep FAIL "$TMP/hostile.out" >&2
    tail -n 3 "$TMP/hostile.out" >&2
    fail "the head answered a hostile call with the wrong status"
}
assert_grep "$TMP/hostile.out" "0 check(s) failed"
assert_grep "$TMP/hostile.out" "^ok   dead secret: Actors.Get with_secret"
assert_grep "$TMP/hostile.out" "^ok   utf-8: a strict client decodes ListJobs"
[ -z "${HV_HOSTILE_LIVE_SECRET:-}" ] || assert_grep "$TMP/hostile.out" "^ok   run-as: a worker's actor on another user's node"
kill -0 "$HEAD_PID" || fail "the head died"
assert_no_grep "$TMP/head.err" "hvc_00000000000000000000000000000000" "a credential reached the head's log"
"$BIN/hvsubmit" --head "$HEAD" -np 1 "$EX/hello" >"$TMP/s.out" 2>&1 || fail "a job after the hostile client failed"
assert_grep "$TMP/s.out" "hello from rank 0 of 1"

# The HTTP flood, while 20 scrapes from 127.0.0.2 (0.2 s apart) each must be answered.
scrapes() {
    local ok=0 i=0
    while [ $i -lt 20 ]; do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --interface 127.0.0.2 --max-time 3 \
            "http://127.0.0.1:$MPORT/metrics")" = 200 ] && ok=$((ok + 1))
        i=$((i + 1))
        sleep 0.2
    done
    echo "$ok"
}
flood() { # NAME SOURCES CONNECTIONS
    /usr/bin/python3 "$HV_SRC_DIR/tests/tools/http_flood.py" "127.0.0.1:$MPORT" "$2" "$3" 8 \
        >"$TMP/flood-$1.out" 2>&1 &
    FLOOD=$!
    PIDS="$PIDS $FLOOD"
    sleep 1 # the flood takes what places it can
    ok=$(scrapes)
    wait "$FLOOD" || fail "http_flood.py failed: $(cat "$TMP/flood-$1.out")"
    echo "HTTP flood from $1: $(cat "$TMP/flood-$1.out"); $ok of 20 scrapes answered"
    [ "$ok" -eq 20 ] || fail "a flood of half-sent requests from $1 kept $((20 - ok)) of 20 scrapes out"
}
flood "one address" 127.0.0.1 200
assert_grep "$TMP/head.err" "HV-HTTP-LIMIT.*a connection from 127.0.0.1 was refused: its address holds 8 connections"
flood "40 addresses" "$(seq -s, -f '127.0.0.%g' 10 49)" 400
assert_grep "$TMP/head.err" "HV-HTTP-LIMIT.*took the place of one that held it without being answered"
kill -0 "$HEAD_PID" || fail "the head died"
pass "$(grep -c '^ok' "$TMP/hostile.out") hostile calls answered as promised; the head still serves; scrapes pass an HTTP flood"
