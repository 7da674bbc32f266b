#!/bin/sh
# A new state database is a new epoch of ids and credentials (issue "Hardening", item 7):
#  - an emptied (0-byte) state.db is refused with a clear error, not taken for a new one;
#  - with state.db moved aside (as that error advises) ids start again at 1 while logs/ and
#    auth.key stay: the new job 1 does not show the old job 1's output, and the old job 1's
#    worker secret (the same job and worker numbers) is refused by the new job 1's KvPut.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 1
D=$TMP/data
"$BIN/hvsubmit" -np 1 /bin/sh -c 'echo OLD-JOB-ONE; echo "secret=$HV_WORKER_SECRET"' \
    >"$TMP/old.out" 2>&1 || fail "the first job failed"
assert_grep "$TMP/old.out" "OLD-JOB-ONE"
S1=$(sed -nE 's/.*secret=(hvw_[0-9a-f_]+).*/\1/p' "$TMP/old.out" | head -n 1)
case "$S1" in hvw_1_*) ;; *) fail "the first job's secret has an unexpected form: $S1" ;; esac
kill -TERM "$(agent_pid node-a)" "$HEAD_PID"
wait_for 10 sh -c "! kill -0 $HEAD_PID" || fail "the head did not stop"

# An emptied state.db: refused, named, and left as it is.
: >"$D/state.db"
rm -f "$D/state.db-wal" "$D/state.db-shm"
"$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/e.out" 2>"$TMP/e.err" &
EPID=$!
PIDS="$PIDS $EPID"
wait_for 10 sh -c "! kill -0 $EPID" || fail "hvhead kept running on an empty state.db"
wait "$EPID" && fail "hvhead exited 0 on an empty state.db"
assert_grep "$TMP/e.err" "$D/state.db is empty" "the error must name the empty file"
assert_grep "$TMP/e.err" "move it aside" "the error must say what to do"
assert_no_grep "$TMP/e.out" "listening on"
[ ! -s "$D/state.db" ] || fail "the empty state.db was written to"

# Moved aside: a new database, a new epoch.
mv "$D/state.db" "$D/state.db.lost"
start_head
start_agent node-b 1
"$BIN/hvsubmit" -d -np 1 /bin/sh -c 'echo NEW-JOB-ONE; echo "secret=$HV_WORKER_SECRET"; exec sleep 30' \
    >"$TMP/new.out" 2>&1 || fail "the new job failed to submit"
assert_grep "$TMP/new.out" "job 1" "the new database must start again at job 1"
wait_for 10 sh -c "'$BIN/hvctl' logs 1 | grep -q NEW-JOB-ONE" || fail "the new job 1 printed nothing"
"$BIN/hvctl" logs 1 >"$TMP/logs1.out" 2>&1
assert_no_grep "$TMP/logs1.out" "OLD-JOB-ONE" "the new job 1 shows the old job 1's output"
S1NEW=$(sed -nE 's/.*secret=(hvw_[0-9a-f_]+).*/\1/p' "$TMP/logs1.out" | head -n 1)
[ "${S1NEW%_*}" = "${S1%_*}" ] || fail "the new job's worker is not numbered as the old one ($S1NEW)"
"$BIN/rawcall" "$HEAD" Rendezvous/KvPut job_id=1 key=k value=stale --token "$S1" >"$TMP/kv.out" 2>&1
ec=$?
[ $ec -eq 16 ] || fail "the old job 1's worker secret: code $ec, want 16 ($(cat "$TMP/kv.out"))"
"$BIN/rawcall" "$HEAD" Rendezvous/KvPut job_id=1 key=k value=mine --token "$S1NEW" >"$TMP/kv2.out" 2>&1 \
    || fail "the new job 1's own secret was refused: $(cat "$TMP/kv2.out")"
"$BIN/hvctl" cancel 1 >/dev/null 2>&1
pass "an empty state.db is refused; a new one starts a new epoch of ids, logs and credentials"
