#!/bin/sh
# Backup and restore of the data directory (docs/operations.md "Backup and restore"): a head
# with a finished job is backed up while it runs (`hvhead backup`, sqlite's online backup for
# state.db, then the key, tokens, logs and artifacts); a second job runs after the backup; the
# data directory is wiped and the backup put in its place; the restored head answers hvctl job,
# hvctl events and hvctl logs for job 1 as before, with the same client token, and knows nothing
# of job 2 (the backup is a point in time).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
"$BIN/hvsubmit" -np 2 /usr/bin/seq 1 20 >"$TMP/submit.out" 2>"$TMP/submit.err" || fail "hvsubmit exited $?"
state_is 1 succeeded || fail "job 1 did not succeed"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job.before" || fail "hvctl job 1"
"$BIN/hvctl" --head "$HEAD" logs 1 >"$TMP/logs.before" || fail "hvctl logs 1"
"$BIN/hvctl" --head "$HEAD" events --job 1 >"$TMP/events.before" || fail "hvctl events"
[ "$(wc -l <"$TMP/logs.before")" -eq 40 ] || fail "job 1 should have 40 lines of output"

# The backup, while the head runs; it refuses to overwrite.
"$BIN/hvhead" backup --config "$TMP/head.yaml" --to "$TMP/backup" >"$TMP/backup.out" 2>"$TMP/backup.err" ||
    fail "hvhead backup exited $?: $(cat "$TMP/backup.err")"
assert_grep "$TMP/backup.out" "hvhead: backed up $TMP/data to $TMP/backup: state.db ([0-9]* pages) and [0-9]* files"
for f in state.db auth.key client.token; do
    [ -f "$TMP/backup/$f" ] || fail "the backup has no $f"
done
[ "$(stat -c %a "$TMP/backup/auth.key")" = 600 ] || fail "the key must stay 0600 in the backup"
[ "$(ls "$TMP/backup/logs" | wc -l)" -ge 1 ] || fail "the backup has no job log"
[ "$(ls "$TMP/backup/artifacts" | wc -l)" -ge 1 ] || fail "the backup has no artifact"
[ ! -e "$TMP/backup/hvhead.lock" ] || fail "the lock must not be copied"
if "$BIN/hvhead" backup --config "$TMP/head.yaml" --to "$TMP/backup" >/dev/null 2>"$TMP/again.err"; then
    fail "a backup over an existing one must be refused"
fi
assert_grep "$TMP/again.err" "exists already"

# A job after the backup: not in it.
"$BIN/hvsubmit" -np 1 /usr/bin/seq 1 3 >/dev/null 2>&1 || fail "job 2 failed"

# Disaster: stop, wipe, restore, start.
kill -TERM "$HEAD_PID"
wait_for 10 sh -c "! kill -0 $HEAD_PID 2>/dev/null" || fail "the head did not stop"
rm -rf "$TMP/data"
cp -a "$TMP/backup" "$TMP/data"
start_head
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job.after" 2>"$TMP/job.after.err" || fail "hvctl job 1 after the restore: $(cat "$TMP/job.after.err")"
# hvctl job shows the workers too; the job's own lines are identical.
head -n 3 "$TMP/job.before" >"$TMP/j1" && head -n 3 "$TMP/job.after" >"$TMP/j2"
cmp -s "$TMP/j1" "$TMP/j2" || { diff "$TMP/j1" "$TMP/j2" >&2; fail "job 1 differs after the restore"; }
assert_grep "$TMP/job.after" "succeeded"
"$BIN/hvctl" --head "$HEAD" logs 1 >"$TMP/logs.after" || fail "hvctl logs 1 after the restore"
cmp -s "$TMP/logs.before" "$TMP/logs.after" || fail "job 1's logs differ after the restore"
"$BIN/hvctl" --head "$HEAD" events --job 1 >"$TMP/events.after" || fail "hvctl events after the restore"
cmp -s "$TMP/events.before" "$TMP/events.after" ||
    { diff "$TMP/events.before" "$TMP/events.after" >&2; fail "job 1's events differ after the restore"; }
if "$BIN/hvctl" --head "$HEAD" job 2 >/dev/null 2>&1; then fail "job 2 came after the backup: it must not be there"; fi
pass "backup of a live head, wipe, restore: job 1, its events and logs are back"
