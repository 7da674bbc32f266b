#!/bin/sh
# Every RPC is authenticated (issue "Trust", the holes found by hand, each end to end):
#  - hvsubmit without a client token is refused before anything runs (it used to run /bin/cat on
#    the join token file); a wrong token too; no job is created.
#  - a raw Jobs/Cancel without credentials (or with a worker's secret) is refused and the job
#    keeps running; with the client token it cancels.
#  - a worker of job A cannot KvPut/KvGet job B's keys, join B's round, watch B, or report B's
#    Done; its own job's KV works; a forged secret (A's mac, B's numbers) is not a credential.
#  - Cluster calls (Session, Fetch, Join) need the node's credential or the join token.
# UNAUTHENTICATED is code 16, PERMISSION_DENIED 7; neither says whether job B exists.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
RAW="$BIN/rawcall"
CT=$HV_TOKEN_FILE
[ -s "$CT" ] || fail "the head did not write its client token to $CT"
assert_grep "$TMP/head.out" "client token in $CT" "the head must say where the client token is"
assert_no_grep "$TMP/head.out" "$(cat "$CT")" "the head must not print the client token"
assert_no_grep "$TMP/head.err" "$(cat "$CT")" "the head must not log the client token"

# 1. hvsubmit without a token: refused, nothing runs, no job. Run from a directory without
#    ./hv-data so the default path does not exist either.
mkdir "$TMP/elsewhere"
(cd "$TMP/elsewhere" && env -u HV_TOKEN_FILE "$BIN/hvsubmit" -np 1 /bin/cat "$TMP/data/token" \
    >"$TMP/nt.out" 2>"$TMP/nt.err"); ec=$?
[ $ec -ne 0 ] || fail "hvsubmit without a token exited 0"
assert_grep "$TMP/nt.err" "no client token" "hvsubmit must say it has no client token"
assert_no_grep "$TMP/nt.out" "$TOKEN" "the join token was printed"
printf 'hvc_0123456789abcdef0123456789\n' >"$TMP/wrong.token"; chmod 600 "$TMP/wrong.token"
"$BIN/hvsubmit" --token-file "$TMP/wrong.token" -np 1 /bin/cat "$TMP/data/token" \
    >"$TMP/wt.out" 2>"$TMP/wt.err"; ec=$?
[ $ec -ne 0 ] || fail "hvsubmit with a wrong token exited 0"
assert_grep "$TMP/wt.err" "not authenticated" "a wrong client token must be reported as such"
assert_no_grep "$TMP/wt.out" "$TOKEN" "the join token was printed"
HV_TOKEN_FILE=$TMP/wrong.token "$BIN/hvctl" jobs >/dev/null 2>"$TMP/wc.err" && fail "hvctl with a wrong HV_TOKEN_FILE worked"
assert_grep "$TMP/wc.err" "not authenticated"
"$BIN/hvctl" --json jobs >"$TMP/jobs0.json" || fail "hvctl jobs with the client token failed"
assert_no_grep "$TMP/jobs0.json" '"id"' "a refused submission created a job"

# 2. A job of ours that prints its worker secret, then waits; job 1.
"$BIN/hvsubmit" -d -np 1 /bin/sh -c 'echo "secret=$HV_WORKER_SECRET"; exec sleep 60' \
    >"$TMP/a.out" 2>&1 || fail "hvsubmit job A failed"
wait_for 10 workers_at_least 1 1 || fail "job 1 did not start"
wait_for 10 sh -c "'$BIN/hvctl' logs 1 | grep -q 'secret=hvw_'" || fail "job 1 did not print its secret"
SA=$("$BIN/hvctl" logs 1 | sed -nE 's/.*secret=(hvw_[0-9a-f_]+).*/\1/p' | head -n 1)
case "$SA" in hvw_1_*) ;; *) fail "worker secret of job 1 has an unexpected form" ;; esac
# job 2, a second job to attack from job 1
"$BIN/hvsubmit" -d -np 1 /bin/sh -c 'exec sleep 60' >"$TMP/b.out" 2>&1 || fail "hvsubmit job B failed"
wait_for 10 workers_at_least 2 1 || fail "job 2 did not start"
WB=$("$BIN/hvctl" --json job 2 | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["workers"][0]["worker_id"])' 2>/dev/null || echo 2)

expect() { # WANT_CODE LABEL rawcall-args...
    local want=$1 label=$2; shift 2
    "$RAW" "$HEAD" "$@" >"$TMP/raw.out" 2>&1; local ec=$?
    [ $ec -eq "$want" ] || fail "$label: code $ec, want $want ($(cat "$TMP/raw.out"))"
}
# Jobs without credentials / with the wrong kind
expect 16 "Jobs/Cancel without credentials" Jobs/Cancel job_id=2
expect 16 "Jobs/Cancel with a wrong client token" Jobs/Cancel job_id=2 --token hvc_0123456789abcdef0123456789
expect 7 "Jobs/Cancel with a worker secret" Jobs/Cancel job_id=2 --token "$SA"
expect 16 "Jobs/Submit without credentials" Jobs/Submit
expect 16 "Jobs/Upload without credentials" Jobs/Upload digest=00
expect 16 "Jobs/ListJobs without credentials" Jobs/ListJobs
expect 16 "Jobs/Watch without credentials" Jobs/Watch job_id=2
expect 16 "Jobs/RevokeNode without credentials" Jobs/RevokeNode node=node-a
state_is 2 running || fail "job 2 is not running after the refused cancels"
# Rendezvous: job 1's worker against job 2
expect 7 "KvPut into another job" Rendezvous/KvPut job_id=2 key=k value=evil --token "$SA"
expect 7 "KvGet from another job" Rendezvous/KvGet job_id=2 key=k --token "$SA"
expect 7 "JoinRound of another job" Rendezvous/JoinRound job_id=2 worker_id="$WB" --token "$SA"
expect 7 "Done of another job" Rendezvous/Done job_id=2 worker_id="$WB" generation=1 --token "$SA"
expect 7 "WatchMembers of another job" Rendezvous/WatchMembers job_id=2 worker_id="$WB" --token "$SA"
# the same refusal for a job that does not exist: nothing leaks about which jobs exist
expect 7 "KvPut into a job that does not exist" Rendezvous/KvPut job_id=99 key=k value=v --token "$SA"
"$RAW" "$HEAD" Rendezvous/KvPut job_id=2 key=k value=v --token "$SA" >"$TMP/m2" 2>&1
"$RAW" "$HEAD" Rendezvous/KvPut job_id=99 key=k value=v --token "$SA" >"$TMP/m99" 2>&1
cmp -s "$TMP/m2" "$TMP/m99" || fail "the refusal differs between an existing and a missing job"
expect 16 "KvPut without credentials" Rendezvous/KvPut job_id=2 key=k value=v
expect 7 "KvPut with the client token" Rendezvous/KvPut job_id=2 key=k value=v --token-file "$CT"
FORGED="hvw_2_${WB}_$(echo "$SA" | sed -E 's/^hvw_[0-9]+_[0-9]+_//')"
expect 16 "a forged worker secret" Rendezvous/KvPut job_id=2 key=k value=v --token "$FORGED"
# its own job: allowed
expect 0 "KvPut into its own job" Rendezvous/KvPut job_id=1 key=mine value=ours --token "$SA"
"$RAW" "$HEAD" Rendezvous/KvGet job_id=1 key=mine --token "$SA" >"$TMP/get.out" || fail "KvGet own job: $(cat "$TMP/get.out")"
assert_grep "$TMP/get.out" "value=ours" "KvGet did not return the value of its own job"
# Cluster: node calls need the node credential
expect 16 "Cluster/Fetch without credentials" Cluster/Fetch digest=00
expect 7 "Cluster/Fetch with the client token" Cluster/Fetch digest=00 --token-file "$CT"
expect 7 "Cluster/Fetch with a worker secret" Cluster/Fetch digest=00 --token "$SA"
expect 16 "Cluster/Join with a wrong join token" Cluster/Join token=nope incarnation=1
# the head logged the refusals without any credential in them
assert_grep "$TMP/head.err" "HV-AUTH-DENIED"
assert_grep "$TMP/head.err" "HV-AUTH-NONE"
assert_no_grep "$TMP/head.err" "$SA" "a worker secret was logged"

# 3. With the client token, the cancel works; the head still serves everyone.
"$BIN/hvctl" cancel 2 >/dev/null || fail "hvctl cancel with the client token failed"
wait_for 10 state_is 2 cancelled || fail "job 2 not cancelled"
"$BIN/hvctl" cancel 1 >/dev/null || fail "hvctl cancel 1"
wait_for 10 no_workers || fail "workers left after cancel"
"$BIN/hvsubmit" -np 2 "$EX/hello" >"$TMP/hello.out" 2>&1 || fail "hello after the attacks failed: $(tail -3 "$TMP/hello.out")"
pass "every RPC authenticated; UNAUTHENTICATED and PERMISSION_DENIED as specified"
