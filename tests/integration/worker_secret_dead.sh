#!/bin/sh
# A worker secret dies with its job (issue 24 §2, docs/security.md "Credentials"): while job 1
# (namespace sandbox) runs, its worker's secret gets the sandbox actor (with its secret) and is
# refused the default one; once the job is cancelled the same secret is refused on every service
# (Actors Get with_secret, List, Create, Kill; Rendezvous KvGet) with UNAUTHENTICATED saying the
# job has ended, and no actor secret comes back. After history retention pruned job 1 (restart
# with history.max_jobs 1), the secret still gets nothing: it never falls back to namespace
# "default". Both actors live on; every refusal is in the audit trail. Before the fix the
# cancelled job's secret got Actors.Get with_secret, and after the prune the default actor.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
PORT=$(free_port)
HV_LISTEN=127.0.0.1:$PORT write_config "$TMP/head.yaml" "history:" "  max_jobs: 1" \
    "  prune_interval_s: 1"
start_head
start_agent node-a 3
RAW=$BIN/rawcall

actor_state() { # NS NAME
    "$BIN/hvctl" --head "$HEAD" actor "$2" --namespace "$1" --json 2>/dev/null |
        sed -nE 's/.*"state": *"([a-z]+)".*/\1/p' | head -n 1
}
alive() { [ "$(actor_state "$1" "$2")" = alive ]; }
for ns in sandbox default; do
    "$BIN/hvctl" --head "$HEAD" actor create --class counter --name ctr --namespace "$ns" \
        -- "$EX/actor_counter" >>"$TMP/create.out" 2>&1 || fail "actor create in $ns failed"
done
wait_for 20 alive sandbox ctr || fail "sandbox/ctr is '$(actor_state sandbox ctr)'"
wait_for 20 alive default ctr || fail "default/ctr is '$(actor_state default ctr)'"

# Job 1 (namespace sandbox): its worker leaves its secret where the test reads it, then waits.
cat >"$TMP/leak.sh" <<EOF
printf '%s\n' "\$HV_WORKER_SECRET" >"$TMP/secret.part" && mv "$TMP/secret.part" "$TMP/secret"
exec sleep 600
EOF
"$BIN/hvsubmit" --head "$HEAD" -np 1 --detach --namespace sandbox --file "$TMP/leak.sh" \
    /bin/sh leak.sh >"$TMP/submit.out" 2>&1 || fail "job 1 was not submitted"
wait_for 20 test -s "$TMP/secret" || fail "job 1's worker did not start"
SEC=$(cat "$TMP/secret")
case $SEC in hvw_1_*) ;; *) fail "job 1's worker secret is not hvw_1_...";; esac

raw() { # OUT Service/Method FIELD=VALUE...: one call with job 1's worker secret
    out=$1; shift
    "$RAW" "$HEAD" "$@" --token "$SEC" >"$TMP/$out.out" 2>&1
}
# While job 1 runs: its namespace's actor, with its secret; not default's.
raw get_live Actors/Get ref.name=ctr with_secret=true || fail "job 1's worker could not get sandbox/ctr"
assert_grep "$TMP/get_live.out" " namespace=sandbox .*secret=hva_" "the running job's worker got no secret"
raw get_default Actors/Get ref.name=ctr ref.namespace=default with_secret=true &&
    fail "job 1's worker reached default/ctr while running"
assert_grep "$TMP/get_default.out" "^code=7 permission denied"

"$BIN/hvctl" --head "$HEAD" cancel 1 >"$TMP/cancel.out" 2>&1 || fail "hvctl cancel 1"
wait_for 20 state_is 1 cancelled || fail "job 1 is '$(job_state 1)', not cancelled"

# Every call of every service the secret could open: UNAUTHENTICATED, saying why.
check_dead() { # WHEN WHY
    when=$1 why=$2
    raw "$when-get" Actors/Get ref.name=ctr with_secret=true
    raw "$when-list" Actors/List
    raw "$when-create" Actors/Create spec.name=sneak spec.class_name=counter \
        spec.command=/bin/sh spec.args+=-c spec.args+=id spec.detached=true
    raw "$when-kill" Actors/Kill ref.name=ctr
    raw "$when-kill-default" Actors/Kill ref.name=ctr ref.namespace=default
    raw "$when-kv" Rendezvous/KvGet job_id=1 key=k
    for c in get list create kill kill-default kv; do
        f=$TMP/$when-$c.out
        grep -q "^code=16 the credential of job 1's workers is no longer valid: $why" "$f" ||
            fail "$when: $c with job 1's secret: $(cat "$f")"
        assert_no_grep "$f" "hva_" "$when: $c returned an actor secret"
    done
}
check_dead cancelled "job 1 has ended (cancelled)"
alive sandbox ctr || fail "sandbox/ctr was killed with a dead secret"
"$BIN/hvctl" --head "$HEAD" actor sneak >/dev/null 2>&1 && fail "a dead secret created an actor"

# Job 2 ends; with history.max_jobs 1 a restart prunes job 1.
"$BIN/hvsubmit" --head "$HEAD" -np 1 /bin/true >"$TMP/j2.out" 2>&1 || fail "job 2 failed"
kill -TERM "$HEAD_PID"
wait_for 10 sh -c "! kill -0 $HEAD_PID 2>/dev/null" || fail "the head did not stop"
start_head
wait_for 5 grep -q HV-HISTORY-PRUNE "$TMP/head.err" || fail "the head did not prune job 1"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job1.out" 2>&1 && fail "job 1 must be pruned"
check_dead pruned "the head no longer knows job 1"
wait_for 20 alive sandbox ctr || fail "sandbox/ctr is '$(actor_state sandbox ctr)' after the restart"
alive default ctr || fail "default/ctr is '$(actor_state default ctr)': killed with a dead secret?"

# The refusals are in the audit trail, as the worker of job 1.
"$BIN/hvctl" --head "$HEAD" audit --refused --who worker --limit 1000 >"$TMP/audit.out" 2>&1 ||
    fail "hvctl audit"
[ "$(grep -c 'no longer valid' "$TMP/audit.out")" -ge 12 ] ||
    fail "the refusals of job 1's secret are not all audited: $(cat "$TMP/audit.out")"
pass "a worker secret is useless once its job ended, before and after the prune"
