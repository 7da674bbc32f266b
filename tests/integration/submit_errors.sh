#!/bin/sh
# Bad input to hvsubmit gets a clear error and a non-zero exit, and leaves no job behind:
# missing file, non-executable file, a script, an unreachable head, an upload over the head's
# limit, an -np the cluster can never hold. hvctl on an unknown id fails clearly too. Each with
# its documented exit status (README "Exit status").
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head "max_upload: 4KiB"
start_agent node-a 2
"$BIN/hvsubmit" "$TMP/nope.bin" 2>"$TMP/e1"; ec=$?
[ $ec -eq 66 ] || fail "missing file: exit $ec, want 66"
assert_grep "$TMP/e1" "nope.bin"
printf '\177ELF' >"$TMP/noexec.bin"; chmod 644 "$TMP/noexec.bin"
"$BIN/hvsubmit" "$TMP/noexec.bin" 2>"$TMP/e2"; ec=$?
[ $ec -eq 65 ] || fail "non-executable: exit $ec, want 65"
assert_grep "$TMP/e2" "executable"
printf '#!/bin/sh\necho hi\n' >"$TMP/script.sh"; chmod 755 "$TMP/script.sh"
"$BIN/hvsubmit" "$TMP/script.sh" 2>"$TMP/e3"; ec=$?
[ $ec -eq 65 ] || fail "script: exit $ec, want 65"
assert_grep "$TMP/e3" "ELF"
"$BIN/hvsubmit" --head 127.0.0.1:1 "$EX/hello" 2>"$TMP/e4"; ec=$?
[ $ec -eq 69 ] || fail "unreachable head: exit $ec, want 69"
assert_grep "$TMP/e4" "cannot reach the head"
"$BIN/hvsubmit" "$EX/hello" 2>"$TMP/e5"; ec=$?
[ $ec -eq 65 ] || fail "oversized upload: exit $ec, want 65"
assert_grep "$TMP/e5" "upload limit"
[ -z "$(ls "$TMP/data/uploads")" ] || fail "an oversized upload left a partial file"
# raise the limit (restart on the same data dir): -np beyond the cluster's slots is refused
kill -TERM "$HEAD_PID"; wait "$HEAD_PID" 2>/dev/null
sed -i 's/^max_upload: .*/max_upload: 64MiB/' "$TMP/head.yaml"
pin_head_port
start_head
wait_for 10 sh -c "'$BIN/hvctl' --head '$HEAD' --json nodes | grep -q '\"alive\"'" || fail "agent did not re-attach"
"$BIN/hvsubmit" -np 64 "$EX/hello" 2>"$TMP/e6"; ec=$?
[ $ec -eq 65 ] || fail "-np 64 on 2 slots: exit $ec, want 65"
assert_grep "$TMP/e6" "never"
"$BIN/hvctl" --head "$HEAD" --json jobs >"$TMP/jobs.json" || fail "hvctl jobs failed"
assert_no_grep "$TMP/jobs.json" '"job_id"' "a refused submission left a job behind"
"$BIN/hvctl" --head "$HEAD" job 42 2>"$TMP/e7"; ec=$?
[ $ec -eq 66 ] || fail "hvctl job 42: exit $ec, want 66"
assert_grep "$TMP/e7" "no job 42"
"$BIN/hvctl" --head "$HEAD" cancel 42 2>"$TMP/e8"; ec=$?
[ $ec -eq 66 ] || fail "hvctl cancel 42: exit $ec, want 66"
pass "bad submissions refused clearly, nothing left behind"
