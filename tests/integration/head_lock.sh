#!/bin/sh
# One data directory, one head: a second head on it (foreground or --daemon) is refused with the
# first one's pid; `hvhead start --daemon` reports a start failure (port in use, bad data dir,
# locked data dir) with a non-zero exit and the reason; a head killed with SIGKILL leaves no
# stale lock behind (the lock is the kernel's, not a pid file).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
port=${HEAD##*:}

# A second foreground head on the same data directory (another port).
"$BIN/hvhead" start --config "$TMP/head.yaml" --listen 127.0.0.1:0 >"$TMP/h2.out" 2>"$TMP/h2.err" &
h2=$!
PIDS="$PIDS $h2"
wait_for 10 sh -c "! kill -0 $h2" || fail "a second head on the same data directory kept running"
wait "$h2" && fail "the second head exited 0"
assert_grep "$TMP/h2.err" "data directory $TMP/data is in use by another head (pid $HEAD_PID)"
assert_no_grep "$TMP/h2.out" "listening on"

# The same with --daemon: refused before detaching, the holder named.
"$BIN/hvhead" start --config "$TMP/head.yaml" --listen 127.0.0.1:0 --daemon \
    --pid-file "$TMP/other.pid" >"$TMP/d2.out" 2>"$TMP/d2.err" && fail "a daemon on a locked data dir exited 0"
assert_grep "$TMP/d2.err" "in use by another head (pid $HEAD_PID)"

# --daemon on a port in use: the daemon fails after detaching; the command says why.
t0=$(date +%s)
"$BIN/hvhead" start --config "$TMP/head.yaml" --data-dir "$TMP/data2" --listen "127.0.0.1:$port" \
    --daemon --log-file "$TMP/d3.log" >"$TMP/d3.out" 2>"$TMP/d3.err" && fail "a daemon on a busy port exited 0"
[ $(( $(date +%s) - t0 )) -lt 30 ] || fail "the failed daemon start took too long"
assert_grep "$TMP/d3.err" "cannot listen on 127.0.0.1:$port"
[ ! -e "$TMP/data2/hvhead.pid" ] || fail "the failed daemon left its pid file"

# --daemon on a data directory that cannot be created.
: > "$TMP/afile"
"$BIN/hvhead" start --config "$TMP/head.yaml" --data-dir "$TMP/afile/data" --daemon \
    >"$TMP/d4.out" 2>"$TMP/d4.err" && fail "a daemon on a bad data dir exited 0"
assert_grep "$TMP/d4.err" "cannot create data directory $TMP/afile/data"

# A good --daemon start prints the ready line and exits 0 once it listens.
"$BIN/hvhead" start --config "$TMP/head.yaml" --data-dir "$TMP/data5" --daemon \
    --log-file "$TMP/d5.log" >"$TMP/d5.out" 2>"$TMP/d5.err" || fail "a good daemon start failed: $(cat "$TMP/d5.err")"
assert_grep "$TMP/d5.out" "listening on"
PIDS="$PIDS $(cat "$TMP/data5/hvhead.pid")"
"$BIN/hvhead" stop --data-dir "$TMP/data5" >/dev/null 2>&1 || fail "stop of the good daemon failed"

# SIGKILL the first head: the lock goes with it and a new head starts on the same directory.
kill -KILL "$HEAD_PID"
wait_for 5 sh -c "! kill -0 $HEAD_PID" || fail "the head did not die"
start_head
"$BIN/hvctl" --head "$HEAD" nodes >/dev/null 2>&1 || fail "the restarted head does not serve"
pass "data directory lock and daemon start failures"
