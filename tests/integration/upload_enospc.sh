#!/bin/sh
# A full disk during an upload: the head answers "no space left on device" naming the path (exit 75),
# discards that partial upload (the space comes back), and keeps serving: a smaller job uploads
# and runs. The data directory is a real 3 MiB tmpfs (skipped where mount is not permitted); the
# whole directory, since uploads/ and artifacts/ must share a file system (a rename publishes).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
data_on_tmpfs 3m hvtest-data
start_head
start_agent node-a 1
cp /bin/echo "$TMP/big" # a small ELF, padded (the builds' hello is 1 to 4 MiB)
truncate -s 4194304 "$TMP/big" # 4 MiB: does not fit in 3 MiB
"$BIN/hvsubmit" -np 1 "$TMP/big" >"$TMP/big.out" 2>"$TMP/big.err"
rc=$?
[ "$rc" -ne 0 ] || fail "a 4 MiB upload into 3 MiB succeeded"
# Not the file's fault: "try again once the head has room" (75), not "the input was refused" (65).
[ "$rc" -eq 75 ] || fail "hvsubmit exited $rc on the head's full disk, want 75: $(cat "$TMP/big.err")"
assert_grep "$TMP/big.err" "no space left on device ($TMP/data/uploads/[0-9a-f]*.part)"
assert_grep "$TMP/big.err" "try again once the head has room"
[ -z "$(ls "$TMP/data/uploads")" ] || fail "the failed upload's part file was kept: $(ls -la "$TMP/data/uploads")"
kill -0 "$HEAD_PID" || fail "the head died"
"$BIN/hvsubmit" -np 1 /bin/echo small-job-ran >"$TMP/s.out" 2>&1 || fail "a job after the full disk failed: $(cat "$TMP/s.out")"
assert_grep "$TMP/s.out" "small-job-ran"
pass "a full disk gives 'no space left on device' with the path; the head keeps serving"
