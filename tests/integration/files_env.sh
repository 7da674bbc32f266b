#!/bin/sh
# --file ships a file into each worker's directory beside the binary (digest-checked upload),
# --env and the HV_* variables reach every worker, and args after the binary are passed through.
# hvctl logs, events and job --json show the same job afterwards.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 1
start_agent node-b 1
printf 'line one\nline two\n' >"$TMP/data.txt"
"$BIN/hvsubmit" -np 2 --file "$TMP/data.txt" /bin/cat data.txt >"$TMP/cat.out" 2>"$TMP/cat.err" || fail "cat job failed"
for r in 0 1; do
    assert_grep "$TMP/cat.out" "^\[$r\]<stdout>:line one$" "rank $r did not see the shipped file"
    assert_grep "$TMP/cat.out" "^\[$r\]<stdout>:line two$"
done
"$BIN/hvsubmit" -np 2 --env FOO=bar --env GREETING="hello world" /usr/bin/env >"$TMP/env.out" 2>"$TMP/env.err" || fail "env job failed"
for r in 0 1; do
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:FOO=bar$" "rank $r: --env FOO missing"
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:GREETING=hello world$" "rank $r: --env with a space"
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:HV_RANK=$r$"
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:HV_SIZE=2$"
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:HV_LOCAL_RANK=0$"
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:HV_LOCAL_SIZE=1$"
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:HV_JOB_ID=2$"
    assert_grep "$TMP/env.out" "^\[$r\]<stdout>:HV_HEAD=$HEAD$"
done
assert_grep "$TMP/env.out" "HV_NODE=node-a"
assert_grep "$TMP/env.out" "HV_NODE=node-b"
# a missing shipped file is refused before anything is uploaded
"$BIN/hvsubmit" -np 1 --file "$TMP/none.txt" /bin/cat none.txt 2>"$TMP/e1"; ec=$?
[ $ec -eq 66 ] || fail "missing --file: exit $ec, want 66"
assert_grep "$TMP/e1" "none.txt"
# hvctl views of job 2
"$BIN/hvctl" --head "$HEAD" logs 2 >"$TMP/logs.out" || fail "hvctl logs"
[ "$(wc -l <"$TMP/logs.out")" -eq "$(wc -l <"$TMP/env.out")" ] || fail "hvctl logs differs from what hvsubmit printed"
"$BIN/hvctl" --head "$HEAD" events --job 2 >"$TMP/ev.out" || fail "hvctl events"
assert_grep "$TMP/ev.out" "succeeded"
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs.out" || fail "hvctl jobs"
[ "$(grep -c succeeded "$TMP/jobs.out")" -eq 2 ] || fail "hvctl jobs should list 2 succeeded jobs"
"$BIN/hvctl" --head "$HEAD" --json job 2 >"$TMP/job.json" || fail "hvctl --json job"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["state"]=="succeeded", d; assert len(d["workers"])==2, d' "$TMP/job.json" \
    || fail "hvctl --json job is not the expected JSON"
pass "files, env, args, HV_* and hvctl views"
