#!/bin/sh
# The low items of issue 24 on actors and the audit trail, through the real binaries:
# - a class with a control character is refused at Create (it would act on the terminal of
#   whoever runs `hvctl actor`, which now also escapes what older heads stored);
# - the actor wire refuses a method name of 256 bytes and one with a NUL inside ("add\0evil",
#   which ran `add`) with HV_EINVAL saying why, and runs nothing (tests/tools/actor_raw.py, a
#   caller with the secret that frames calls by hand);
# - audit rows name the actor of a Create and a Kill, say "(revoke)" for RevokeNode (it read
#   "(undrain)"), and a worker's Get and List of another namespace, refused by the Actors
#   service, leave a row (they left none);
# - an actor's own output (its HV-ACTOR-AUTH refusal of a caller with a wrong secret) reaches
#   the operator: hvctl actor-logs (it was dropped by the head).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 3
RAW=$BIN/rawcall

# A class with a control character never gets in.
"$BIN/hvctl" --head "$HEAD" actor create --class "$(printf 'c\033]0;x\007')" --name bad \
    -- "$EX/actor_counter" >"$TMP/bad.out" 2>&1 && fail "a class with control characters was created"
assert_grep "$TMP/bad.out" "class: at most 255 bytes, no '=' and no control character"

"$BIN/hvctl" --head "$HEAD" actor create --class counter --name ctr -- "$EX/actor_counter" \
    >"$TMP/create.out" 2>&1 || fail "actor create failed: $(cat "$TMP/create.out")"
addr() { "$BIN/hvctl" --head "$HEAD" actor ctr --json 2>/dev/null | sed -nE 's/.*"address": *"([^"]+)".*/\1/p'; }
wait_for 20 sh -c "[ -n \"\$(\"$BIN/hvctl\" --head '$HEAD' actor ctr --json 2>/dev/null | grep '\"address\": \"1')\" ]" ||
    fail "ctr did not come alive"
ADDR=$(addr)
"$RAW" "$HEAD" Actors/Get --token-file "$HV_TOKEN_FILE" ref.name=ctr with_secret=true >"$TMP/sec.out" 2>&1
HV_ACTOR_SECRET=$(sed -nE 's/.* secret=(hva_[0-9a-f_]+) .*/\1/p' "$TMP/sec.out")
export HV_ACTOR_SECRET
[ -n "$HV_ACTOR_SECRET" ] || fail "no actor secret: $(cat "$TMP/sec.out")"

# The wire: both refused with HV_EINVAL (1) and the reason; add never ran.
wire() { /usr/bin/python3 "$HV_SRC_DIR/tests/tools/actor_raw.py" "$ADDR" "$@"; }
wire 'add\x00evil' 5 >"$TMP/nul.out" 2>&1
assert_grep "$TMP/nul.out" "^error 1 invalid call: the method name has a NUL byte at offset 3"
wire @256 5 >"$TMP/long.out" 2>&1
assert_grep "$TMP/long.out" "^error 1 invalid call: a method name of 256 bytes, at most 255"
wire get >"$TMP/get.out" 2>&1
assert_grep "$TMP/get.out" "^reply 0 0$" "add ran: $(cat "$TMP/get.out")"
wire add 2 >"$TMP/add.out" 2>&1
assert_grep "$TMP/add.out" "^reply 0 2$"

# A caller with a wrong secret: the actor's refusal (HV-ACTOR-AUTH on its stderr) and its
# refusals of the bad names reach the operator through hvctl actor-logs.
HV_ACTOR_SECRET=hva_0_wrongwrongwrongwrong wire get >"$TMP/wrong.out" 2>&1
assert_grep "$TMP/wrong.out" "^error 19 not authenticated: wrong secret for this actor"
logs_have() { "$BIN/hvctl" --head "$HEAD" actor-logs ctr >"$TMP/alogs.out" 2>&1 && grep -q -- "$1" "$TMP/alogs.out"; }
wait_for 10 logs_have "HV-ACTOR-AUTH" || fail "hvctl actor-logs does not show the refused caller: $(cat "$TMP/alogs.out")"
assert_grep "$TMP/alogs.out" '^\[1\]<stderr>:.*HV-ACTOR-AUTH'
assert_grep "$TMP/alogs.out" '^\[1\]<stderr>:.*HV-ACTOR-CALL: refused a call'
assert_no_grep "$TMP/alogs.out" "$HV_ACTOR_SECRET" "the actor's log holds its secret"

# Audit: Create and Kill name the actor; RevokeNode names the revocation.
start_agent node-x 1
"$BIN/hvctl" --head "$HEAD" node revoke node-x >"$TMP/revoke.out" 2>&1 || fail "node revoke"
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name victim -- "$EX/actor_counter" \
    >>"$TMP/create.out" 2>&1 || fail "actor create victim"
"$BIN/hvctl" --head "$HEAD" kill-actor victim >"$TMP/kill.out" 2>&1 || fail "kill-actor victim"

# A job of namespace team: its worker's Get and List of default are refused, and audited.
cat >"$TMP/leak.sh" <<EOF
printf '%s\n' "\$HV_WORKER_SECRET" >"$TMP/secret.part" && mv "$TMP/secret.part" "$TMP/secret"
exec sleep 600
EOF
"$BIN/hvsubmit" --head "$HEAD" -np 1 --detach --namespace team --file "$TMP/leak.sh" /bin/sh leak.sh \
    >"$TMP/submit.out" 2>&1 || fail "the job was not submitted"
wait_for 20 test -s "$TMP/secret" || fail "the job's worker did not start"
SEC=$(cat "$TMP/secret")
"$RAW" "$HEAD" Actors/Get --token "$SEC" ref.name=ctr ref.namespace=default with_secret=true \
    >"$TMP/xget.out" 2>&1 && fail "a worker of team got default/ctr"
assert_grep "$TMP/xget.out" "^code=7 permission denied"
"$RAW" "$HEAD" Actors/List --token "$SEC" namespace=default >"$TMP/xlist.out" 2>&1 &&
    fail "a worker of team listed default"
assert_grep "$TMP/xlist.out" "^code=7 permission denied"
"$RAW" "$HEAD" Actors/Get --token "$SEC" ref.name=nosuch >"$TMP/nf.out" 2>&1 # not found: no refusal

"$BIN/hvctl" --head "$HEAD" audit --limit 1000 >"$TMP/audit.out" 2>&1 || fail "hvctl audit"
assert_grep "$TMP/audit.out" "Create .*actor ctr (class counter) .*OK"
assert_grep "$TMP/audit.out" "Create .*actor bad (class c\\\\x1b]0;x\\\\x07) .*INVALID_ARGUMENT"
assert_grep "$TMP/audit.out" "Kill .*actor victim .*OK"
assert_grep "$TMP/audit.out" "RevokeNode .*node node-x (revoke) .*OK"
assert_no_grep "$TMP/audit.out" "undrain"
assert_grep "$TMP/audit.out" "worker job 1 worker [0-9]* .*Get .*actor default/ctr (secret) .*PERMISSION_DENIED"
assert_grep "$TMP/audit.out" "worker job 1 worker [0-9]* .*List .*actors of namespace default .*PERMISSION_DENIED"
assert_no_grep "$TMP/audit.out" "actor nosuch" "a Get that refused nobody was audited"
"$BIN/hvctl" --head "$HEAD" cancel 1 >/dev/null 2>&1
pass "control characters kept out of classes; the wire refuses bad method names; the audit names actors, revocations and namespace refusals"
