#!/bin/sh
# A small data directory (a real 24 MiB tmpfs; skipped where mount is not permitted).
# 1. One job prints 30 MB: its log stops at logs.max_job_bytes with the truncation marker and the
#    count of dropped bytes, while another job runs and succeeds, hvctl answers, and a later job
#    is stored: sqlite keeps its room.
# 2. Something else fills the disk: a submit is refused at once with "the head cannot store its
#    state" (exit 75, no hang), a running job's hvsubmit says the same when its worker exits;
#    once the filler is gone, that job is finished and stored, and new jobs run.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
data_on_tmpfs 24m hvtest-data
start_head "logs: {max_job_bytes: 4MiB}"
start_agent node-a 3

# 1. 30000 lines of 1000 digits.
timeout 30 "$BIN/hvsubmit" -np 1 /usr/bin/seq -f %01000g 1 30000 >"$TMP/spew.out" 2>"$TMP/spew.err" &
SPEW=$!
timeout 20 "$BIN/hvsubmit" -np 1 /bin/echo hello-ran >"$TMP/hello.out" 2>&1 || fail "a job beside the noisy one failed ($?): $(cat "$TMP/hello.out")"
assert_grep "$TMP/hello.out" "hello-ran"
wait $SPEW || fail "hvsubmit of the noisy job exited $?: $(tail -n 3 "$TMP/spew.err")"
assert_grep "$TMP/spew.err" "\[hv\] log truncated: job [0-9]* wrote more than 4194304 bytes; further output dropped"
assert_grep "$TMP/spew.err" "bytes of the job's output were dropped (logs.max_job_bytes)"
spew_id=$(sed -nE 's/^hvsubmit: job ([0-9]+) submitted.*/\1/p' "$TMP/spew.err")
size=$(stat -c %s "$TMP"/data/logs/*-"$spew_id".log) # logs/<epoch>-<job>.log
[ "$size" -le $((4194304 + 1024)) ] || fail "job 1's log holds $size bytes, over its 4 MiB cap"
"$BIN/hvctl" --head "$HEAD" status >"$TMP/status.out" 2>&1 || fail "hvctl status failed: $(cat "$TMP/status.out")"
timeout 20 "$BIN/hvsubmit" -np 1 /bin/echo stored-after >"$TMP/after.out" 2>&1 || fail "a later job failed ($?): $(cat "$TMP/after.out")"
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs.out" 2>&1 || fail "hvctl jobs failed"
[ "$(grep -c succeeded "$TMP/jobs.out")" -eq 3 ] || fail "want 3 stored succeeded jobs: $(cat "$TMP/jobs.out")"

# 2. Two jobs running when the disk fills up: job 4 ends meanwhile, job 5's hvsubmit gives up
#    after its --head-timeout (the wait is bounded).
# Job 4 ends when told to (the file $TMP/go, outside the full file system).
timeout 60 "$BIN/hvsubmit" -np 1 --head-timeout 30 /bin/sh -c "while [ ! -e '$TMP/go' ]; do sleep 0.05; done" \
    >"$TMP/sleep.out" 2>"$TMP/sleep.err" &
SLEEP=$!
wait_for 10 state_is 4 running || fail "job 4 did not start: $(cat "$TMP/sleep.err")"
timeout 60 "$BIN/hvsubmit" -np 1 --head-timeout 2 /bin/sleep 30 >"$TMP/long.out" 2>"$TMP/long.err" &
LONG=$!
wait_for 10 state_is 5 running || fail "job 5 did not start: $(cat "$TMP/long.err")"
dd if=/dev/zero of="$TMP/data/filler" bs=64k 2>/dev/null
start=$(date +%s)
timeout 20 "$BIN/hvsubmit" -np 1 /bin/echo too-late >"$TMP/full.out" 2>&1
rc=$?
[ $rc -eq 75 ] || fail "a submit on a full disk exited $rc, want 75: $(cat "$TMP/full.out")"
[ $(($(date +%s) - start)) -le 5 ] || fail "a submit on a full disk took $(($(date +%s) - start)) s"
# (The head finds the program already uploaded, and cannot store that it is in use: the same
# words, said before the submit.)
assert_grep "$TMP/full.out" "^hvsubmit: the head cannot store its state in $TMP/data/state.db (.*full.*; $TMP/data has [0-9]* bytes free); \(the job was not\|nothing was\) submitted"
wait_for 5 grep -q "hvsubmit: the head cannot store its state in .*; job 4 waits for it" "$TMP/sleep.err" \
    || fail "job 4's hvsubmit was not told: $(cat "$TMP/sleep.err")"
# Job 4's worker exits: the head knows it ended, but cannot store it, so it is not told as ended.
touch "$TMP/go"
wait_for 10 state_is 4 succeeded || fail "job 4 did not end"
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs.out" 2>&1 || fail "hvctl jobs failed on a full disk"
grep -q "^ *4 .*running" "$TMP/jobs.out" || fail "job 4's end was stored on a full disk? $(cat "$TMP/jobs.out")"
wait $LONG
rc=$?
[ $rc -eq 75 ] || fail "job 5's hvsubmit exited $rc on a full disk, want 75: $(cat "$TMP/long.err")"
assert_grep "$TMP/long.err" "gave up after 2 s: the head still cannot store its state; job 5 may still be running"
assert_grep "$TMP/head.err" "HV-STORE-WRITE"
[ "$(grep -c "HV-STORE-WRITE\|HV-STORE-SQL" "$TMP/head.err")" -le 4 ] || fail "the failing store was logged again and again: $(grep "HV-STORE" "$TMP/head.err")"
kill -0 $SLEEP 2>/dev/null || fail "job 4's hvsubmit ended while the disk was full: $(cat "$TMP/sleep.err")"
rm -f "$TMP/data/filler"
wait $SLEEP || fail "job 4's hvsubmit exited $? once there was room: $(cat "$TMP/sleep.err")"
assert_grep "$TMP/sleep.err" "hvsubmit: the head stores its state again"
[ "$(grep -c "cannot store its state" "$TMP/sleep.err")" -eq 1 ] || fail "job 4's hvsubmit was told more than once: $(cat "$TMP/sleep.err")"
assert_grep "$TMP/sleep.err" "hvsubmit: job 4 succeeded"
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs.out" 2>&1 || fail "hvctl jobs failed"
grep -q "^ *4 .*succeeded" "$TMP/jobs.out" || fail "job 4 is not stored as succeeded: $(cat "$TMP/jobs.out")"
"$BIN/hvctl" --head "$HEAD" cancel 5 >/dev/null 2>&1 || fail "hvctl cancel 5 failed"
timeout 20 "$BIN/hvsubmit" -np 1 /bin/echo room-again >"$TMP/again.out" 2>&1 || fail "a job after the full disk failed ($?): $(cat "$TMP/again.out")"
assert_grep "$TMP/again.out" "room-again"
[ -n "${HV_TEST_SHOW:-}" ] && tail -n 5 "$TMP/spew.err" "$TMP/full.out" "$TMP/sleep.err" && grep -E "STORE|LOG-" "$TMP/head.err"
pass "log caps keep sqlite's room; a full disk is said to every client, and everything resumes"
