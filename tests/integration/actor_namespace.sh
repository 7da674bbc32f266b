#!/bin/sh
# Namespaces for jobs (docs/actors.md, issue 17 §3): `hvsubmit --namespace NS` stores the
# namespace with the job; its workers look up and call the actors of NS (a bare name means NS),
# and are refused those of another namespace, "default" included; a job without --namespace is
# held to "default"; a client token reaches every namespace. A bad namespace is refused by
# hvsubmit.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 4

actor_field() { # NS NAME FIELD
    "$BIN/hvctl" --head "$HEAD" actor "$2" --namespace "$1" --json 2>/dev/null |
        sed -nE "s/.*\"$3\": *\"?([^\",]*)\"?,?$/\1/p" | head -n 1
}
alive() { [ "$(actor_field "$1" "$2" state)" = alive ]; }
for ns in team default; do
    "$BIN/hvctl" --head "$HEAD" actor create --class counter --name ctr --namespace "$ns" \
        --arg "$([ "$ns" = team ] && echo 100 || echo 0)" -- "$EX/actor_counter" \
        >>"$TMP/create.out" 2>>"$TMP/create.err" || fail "actor create in $ns failed: $(cat "$TMP/create.err")"
done
wait_for 20 alive team ctr || fail "team/ctr is '$(actor_field team ctr state)'"
wait_for 20 alive default ctr || fail "default/ctr is '$(actor_field default ctr state)'"

job() { # OUT [hvsubmit options] -- ARGS of actor_call
    out=$1; shift
    "$BIN/hvsubmit" --head "$HEAD" -np 1 "$@" >"$TMP/$out.out" 2>"$TMP/$out.err"
}
# A job of namespace team: a bare name is team's actor, and so is team/ctr.
job team1 --namespace team "$EX/actor_call" @ctr add 5 || fail "a team job calling @ctr failed: $(tail -3 "$TMP/team1.out" "$TMP/team1.err")"
grep -q '^\[0\]<stdout>:105$' "$TMP/team1.out" || fail "the team job did not reach team/ctr: $(cat "$TMP/team1.out")"
job team2 --namespace team "$EX/actor_call" @team/ctr get || fail "a team job calling @team/ctr failed"
grep -q '^\[0\]<stdout>:105$' "$TMP/team2.out" || fail "team/ctr get: $(cat "$TMP/team2.out")"
# ... and refused the default namespace's.
job team3 --namespace team "$EX/actor_call" @default/ctr get && fail "a team job reached default/ctr"
grep -q -h "permission denied: the workers of job [0-9]* may only use the actors of its namespace 'team', not 'default'" "$TMP/team3.out" "$TMP/team3.err" ||
    fail "the refusal does not say why: $(cat "$TMP/team3.out")"
# A job without --namespace: default's actor by its bare name, never team's.
job def1 "$EX/actor_call" @ctr add 1 || fail "a default job calling @ctr failed"
grep -q '^\[0\]<stdout>:1$' "$TMP/def1.out" || fail "the default job did not reach default/ctr: $(cat "$TMP/def1.out")"
job def2 "$EX/actor_call" @team/ctr get && fail "a job of namespace default reached team/ctr"
grep -q -h "permission denied: the workers of job [0-9]* may only use the actors of its namespace 'default', not 'team'" "$TMP/def2.out" "$TMP/def2.err" ||
    fail "the refusal does not say why: $(cat "$TMP/def2.out")"
# Another namespace has no ctr.
job other1 --namespace other "$EX/actor_call" @ctr get && fail "a job of namespace other found a ctr"
grep -q -h "no actor named 'ctr' in namespace 'other'" "$TMP/other1.out" "$TMP/other1.err" || fail "other: $(cat "$TMP/other1.out")"
# A client token: any namespace.
[ "$("$EX/actor_call" @team/ctr get --timeout 10000 2>>"$TMP/call.err")" = 105 ] || fail "the client could not call team/ctr"
[ "$("$EX/actor_call" @ctr get --timeout 10000 2>>"$TMP/call.err")" = 1 ] || fail "the client's bare name is not default/ctr"
# A bad namespace never reaches the head.
"$BIN/hvsubmit" --head "$HEAD" -np 1 --namespace "bad/ns" "$EX/actor_call" @ctr get >/dev/null 2>"$TMP/bad.err" &&
    fail "hvsubmit accepted --namespace bad/ns"
assert_grep "$TMP/bad.err" "namespace 'bad/ns'"
pass "a job's workers use the actors of its namespace only; clients any"
