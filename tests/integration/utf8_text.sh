#!/bin/sh
# Text that is not UTF-8 never gets in (issue 24 §3, docs/security.md "Resource bounds: sizes"):
# a raw client (rawcall: no UTF-8 check of its own) sends a job name, an --env name, a node name
# (Join), an actor class (Actors.Create) and a drain reason with a byte 0xff; each is refused with
# INVALID_ARGUMENT naming the field, and nothing is stored. hvsubmit says so itself, before it
# sends, in its own terms (--name, --env, an argument, a shipped file's name), exit 65; an odd
# $USER is sent repaired (the job runs). A program's output that is not UTF-8 is kept with '?'
# for each such byte. Then a strict client (Python's protobuf, as python3-grpcio users have
# it) lists jobs, each job, events, the audit trail, nodes and actors without a decoding error.
# Before the fix the raw requests were stored, and ListJobs, ListEvents, ListNodes and Actors.List
# failed with INTERNAL for the strict client.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
RAW=$BIN/rawcall
FF=$(printf '\377')
raw() { # OUT WANT_CODE FIELD Service/Method FIELD=VALUE...: refused naming FIELD
    out=$1 want=$2 field=$3; shift 3
    "$RAW" "$HEAD" "$@" >"$TMP/$out.out" 2>&1
    grep -q "^code=$want $field: not UTF-8 text (byte 0xff" "$TMP/$out.out" ||
        fail "$out: want code $want naming $field: $(cat "$TMP/$out.out")"
}
raw name 3 spec.name Jobs/Submit --token-file "$HV_TOKEN_FILE" spec.name="job$FF" \
    spec.command=/bin/true spec.np=1
raw env 3 "spec.env\[1\].key" Jobs/Submit --token-file "$HV_TOKEN_FILE" spec.name=j \
    spec.command=/bin/true spec.np=1 spec.env+=A=1 spec.env+="B${FF}=2"
raw arg 3 "spec.args\[0\]" Jobs/Submit --token-file "$HV_TOKEN_FILE" spec.name=j \
    spec.command=/bin/echo spec.np=1 spec.args+="x${FF}y"
raw join 3 node.name Cluster/Join token="$TOKEN" node.name="node$FF" node.slots=1 incarnation=5
raw class 3 spec.class_name Actors/Create --token-file "$HV_TOKEN_FILE" spec.name=a \
    spec.class_name="c${FF}" spec.command=/bin/true spec.detached=true
raw reason 3 reason Jobs/DrainNode --token-file "$HV_TOKEN_FILE" node=node-a reason="r$FF"
# Nothing of them was stored or done.
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs.out" 2>&1 || fail "hvctl jobs"
[ "$(grep -c '^ *[0-9]' "$TMP/jobs.out")" -eq 0 ] || fail "a refused job was stored: $(cat "$TMP/jobs.out")"
"$BIN/hvctl" --head "$HEAD" actors >"$TMP/actors.out" 2>&1 || fail "hvctl actors"
assert_no_grep "$TMP/actors.out" "^default" "a refused actor was stored"
[ "$(alive_nodes)" -eq 1 ] || fail "the refused Join added a node"
"$BIN/hvctl" --head "$HEAD" nodes | grep -q draining && fail "the refused drain was done"
assert_grep "$TMP/head.err" "HV-UTF8-REFUSED"

# hvsubmit refuses before it sends, naming the flag or file and showing the byte escaped.
sub() { # OUT hvsubmit-args...: exit 65
    out=$1; shift
    "$BIN/hvsubmit" --head "$HEAD" -np 1 "$@" >"$TMP/$out.out" 2>&1
    rc=$?
    [ $rc -eq 65 ] || fail "hvsubmit $out exited $rc, not 65: $(cat "$TMP/$out.out")"
}
sub s-name --name "job$FF" /bin/true
assert_grep "$TMP/s-name.out" "^hvsubmit: --name 'job\\\\xff' is not UTF-8 text (byte 0xff at offset 3)"
sub s-env --env "K$FF=1" /bin/true
assert_grep "$TMP/s-env.out" "^hvsubmit: --env: the name 'K\\\\xff' is not UTF-8 text"
sub s-val --env "K=v$FF" /bin/true
assert_grep "$TMP/s-val.out" "^hvsubmit: --env K: the value 'v\\\\xff' is not UTF-8 text"
sub s-arg /bin/echo ok "a${FF}b"
assert_grep "$TMP/s-arg.out" "^hvsubmit: argument 2 of the program 'a\\\\xffb' is not UTF-8 text (byte 0xff at offset 1)"
printf 'x\n' >"$TMP/f$FF.txt"
sub s-file --file "$TMP/f$FF.txt" /bin/true
assert_grep "$TMP/s-file.out" "^hvsubmit: the shipped file (--file or script) 'f\\\\xff.txt' is not UTF-8 text"
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs2.out" 2>&1
[ "$(grep -c '^ *[0-9]' "$TMP/jobs2.out")" -eq 0 ] || fail "hvsubmit sent a job it refused"
# A $USER that is not UTF-8 does not stop a job (hvsubmit sends it repaired: "me?").
USER="me$FF" "$BIN/hvsubmit" --head "$HEAD" -np 1 --name "caf$(printf '\303\251')" /bin/echo hi \
    >"$TMP/ok.out" 2>&1 || fail "a job with UTF-8 text failed: $(cat "$TMP/ok.out")"
"$BIN/hvctl" --head "$HEAD" --json job 1 >"$TMP/job1.json" 2>&1 || fail "hvctl job 1"
assert_grep "$TMP/job1.json" "\"name\": \"caf$(printf '\303\251')\""

# A program's output that is not UTF-8 is kept, each such byte as '?', and the head says so.
"$BIN/hvsubmit" --head "$HEAD" -np 1 /usr/bin/printf 'bin\377ary\n' >"$TMP/bin.out" 2>&1 ||
    fail "a job printing bytes that are not UTF-8 failed: $(cat "$TMP/bin.out")"
assert_grep "$TMP/bin.out" "<stdout>:bin?ary$"
"$BIN/hvctl" --head "$HEAD" logs 2 >"$TMP/logs2.out" 2>&1 || fail "hvctl logs 2"
assert_grep "$TMP/logs2.out" "bin?ary"
assert_grep "$TMP/head.err" "HV-UTF8-REPAIRED.*log.lines\[0\]: not UTF-8 text"

# A strict client reads every listing.
if /usr/bin/python3 -c "import grpc, google.protobuf" 2>/dev/null; then
    /usr/bin/python3 "$HV_SRC_DIR/tests/tools/strict_lists.py" "$HEAD" "$HV_SRC_DIR/proto" \
        "$HV_TOKEN_FILE" >"$TMP/strict.out" 2>&1 || fail "a strict client could not read the listings"
    assert_grep "$TMP/strict.out" "^0 call(s) failed"
else
    echo "note: python3-grpcio or python3-protobuf missing: the strict client was not run"
fi
pass "text that is not UTF-8 is refused naming the field; every listing stays readable"
