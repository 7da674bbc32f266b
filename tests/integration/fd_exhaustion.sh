#!/bin/sh
# A head whose open-file limit is low (hard limit 128, which it cannot raise) is flooded with
# Jobs/Watch streams (each holds a log file open) and with idle TCP connections that send nothing:
#  - Watch streams beyond the bounds (per client credential, and in all) are refused with
#    RESOURCE_EXHAUSTED and a clear message, and hvctl says so in plain words;
#  - idle connections are closed by the head after limits.handshake_timeout_ms;
#  - accept() hitting EMFILE does not stop the head for good: once the flood is gone,
#    `hvctl status` answers and jobs run (gRPC core gives up its listener; the head opens a new one).
. "$HV_SRC_DIR/tests/lib.sh"
/usr/bin/python3 -c "import grpc" 2>/dev/null || { echo "SKIP: python3-grpcio is not installed"; exit 77; }
FLOOD="/usr/bin/python3 $HV_SRC_DIR/tests/tools/fd_flood.py"
hv_setup
# A second client credential (DATA/clients/NAME.token), to fill the bound in all.
mkdir -p "$TMP/data/clients" && chmod 700 "$TMP/data" "$TMP/data/clients"
echo hvc_second0123456789abcdef >"$TMP/data/clients/second.token"
chmod 600 "$TMP/data/clients/second.token"
cp "$TMP/data/clients/second.token" "$TMP/second.token"
# Connection bounds far above what the descriptors allow (the derived ones would keep the flood
# below EMFILE, see conn_limit.sh): this test is about running out anyway.
write_config "$TMP/head.yaml" "limits:" "  handshake_timeout_ms: 1000" \
    "  max_watch_streams: 10" "  max_watch_streams_per_client: 6" \
    "  max_connections: 100000" "  max_connections_per_client: 100000"
# The head raises its soft limit to the hard one: the hard limit is what bounds it here.
( ulimit -n 128 && exec "$BIN/hvhead" start --config "$TMP/head.yaml" ) \
    >>"$TMP/head.out" 2>>"$TMP/head.err" &
HEAD_PID=$!
PIDS="$PIDS $HEAD_PID"
wait_for 10 grep -q 'listening on' "$TMP/head.out" || fail "hvhead did not print its ready line"
HEAD=$(grep 'listening on' "$TMP/head.out" | tail -n 1 | sed -E 's/.*listening on ([^ ]+) .*/\1/')
export HV_HEAD=$HEAD
grep -q 'Max open files *128 *128' "/proc/$HEAD_PID/limits" || fail "the head's open-file limit is not 128"

# A running job: Watch streams on it stay open.
start_agent node-a 2
JOB=$("$BIN/hvsubmit" --head "$HEAD" --detach -np 1 "$EX/sleeper" 60 2>"$TMP/submit.err") || fail "submit failed"
wait_for 10 state_is "$JOB" running || fail "job $JOB did not start"

# 8 streams with the first credential: 6 held, 2 refused per client; meanwhile 8 with the
# second: 4 held (10 in all), 4 refused. hvctl, with the first, is told why in plain words.
timeout 20 $FLOOD watch "$HEAD" "$HV_TOKEN_FILE" "$JOB" 8 6 >"$TMP/watch1.out" 2>&1 &
W1=$!
sleep 1.5
timeout 20 $FLOOD watch "$HEAD" "$TMP/second.token" "$JOB" 8 2 >"$TMP/watch2.out" 2>&1 || fail "watch flood failed"
timeout 10 "$BIN/hvctl" --head "$HEAD" logs "$JOB" -f >"$TMP/logs.out" 2>"$TMP/logs.err"
echo "exit $?" >>"$TMP/logs.err"
wait "$W1" || fail "watch flood failed"
assert_grep "$TMP/watch1.out" "held 6 exhausted 2 other 0" "the first client did not get 6 streams and 2 refusals"
assert_grep "$TMP/watch1.out" "too many watch streams for this client credential: 6 open, limit 6"
assert_grep "$TMP/watch2.out" "held 4 exhausted 4 other 0" "the second client did not get the 4 streams left"
assert_grep "$TMP/watch2.out" "too many watch streams: 10 open, limit 10"
assert_grep "$TMP/logs.err" "hvctl: too many watch streams" "hvctl did not say why its stream was refused"
assert_grep "$TMP/logs.err" "exit 75" "hvctl did not exit 75 (try again later) on a refused stream: $(cat "$TMP/logs.err")"

# Streams closed by their clients free their places.
timeout 20 $FLOOD watch "$HEAD" "$HV_TOKEN_FILE" "$JOB" 6 1 >"$TMP/watch3.out" 2>&1 || fail "watch flood failed"
assert_grep "$TMP/watch3.out" "held 6 exhausted 0" "closed streams did not free their places"

# 150 connections that send nothing, more than the head has descriptors: each is closed by the
# head (after the 1 s handshake timeout, or with the listener gRPC gave up).
timeout 20 $FLOOD idle "$HEAD" 150 6 >"$TMP/idle.out" 2>&1 || fail "idle flood failed"
assert_grep "$TMP/idle.out" "opened 150 closed 150" "the head did not close the idle connections"
kill -0 "$HEAD_PID" || fail "the head died"
# hvctl waits for a connection that never comes when the listener is dead: 4 tries of 3 s.
ok=0
for i in 1 2 3 4; do
    if timeout 3 "$BIN/hvctl" --head "$HEAD" status >"$TMP/status.out" 2>&1; then ok=1; break; fi
    sleep 0.5
done
[ "$ok" = 1 ] || fail "the head no longer accepts connections after the flood"

# And it still runs jobs: the agent stayed, the running job can be cancelled, a new job runs.
timeout 10 "$BIN/hvctl" --head "$HEAD" cancel "$JOB" >/dev/null 2>&1 || fail "cannot cancel job $JOB after the flood"
wait_for 10 state_is "$JOB" cancelled || fail "job $JOB was not cancelled"
timeout 30 "$BIN/hvsubmit" --head "$HEAD" -np 1 "$EX/hello" >"$TMP/s.out" 2>&1 || fail "a job after the flood failed"
assert_grep "$TMP/s.out" "hello from rank 0 of 1"
pass "watch streams bounded, idle connections closed, the head serves after exhausting its descriptors"
