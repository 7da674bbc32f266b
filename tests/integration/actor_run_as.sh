#!/bin/sh
# An actor a job's worker creates runs only where and as that job's workers run (issue 24 §1,
# docs/security.md "What a job's worker may do with actors"). node-a runs workers as user UA
# (--run-as), node-b as UB, node-r as root (no --run-as); each agent declares its user as the
# node label hv.run_as. A job on node-a leaks its worker secret; with it, Actors.Create of a
# `/bin/sh -c` command is refused (PERMISSION_DENIED, saying why) when it names node-r's or
# node-b's labels or asks for hv.run_as=root, and nothing runs as root or UB; without labels the
# actor is placed on node-a, runs as UA and carries hv.run_as=UA, also after a restart. Before
# the fix the actor named by node-r's label ran as uid 0. A client token is not held (it may
# run anything anywhere). hvagent refuses --labels hv.run_as=... Needs root and useradd.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup_users hvr
DROP=$TMP/drop
mkdir -m 1777 "$DROP"
start_head
start_agent node-a 2 --run-as "$UA" --labels host=node-a
# Job 1 on node-a (the only node yet): its worker leaves its secret for the test, then waits.
cat >"$TMP/leak.sh" <<EOF
umask 077
printf '%s\n' "\$HV_WORKER_SECRET" >"$DROP/secret.part" && mv "$DROP/secret.part" "$DROP/secret"
exec sleep 600
EOF
"$BIN/hvsubmit" --head "$HEAD" -np 1 --detach --file "$TMP/leak.sh" /bin/sh leak.sh \
    >"$TMP/submit.out" 2>&1 || fail "job 1 was not submitted"
wait_for 20 test -s "$DROP/secret" || fail "job 1's worker did not start"
SEC=$(cat "$DROP/secret")
start_agent node-b 2 --run-as "$UB" --labels host=node-b
start_agent node-r 2 --labels host=node-r
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.out" 2>&1 || fail "hvctl nodes"
for n in "node-a.*hv.run_as=$UA" "node-b.*hv.run_as=$UB" "node-r.*hv.run_as=root"; do
    assert_grep "$TMP/nodes.out" "$n" "hvctl nodes does not show $n"
done

create() { # NAME [FIELD=VALUE...]: job 1's worker creates an actor running `id -un`
    name=$1; shift
    "$BIN/rawcall" "$HEAD" Actors/Create --token "$SEC" spec.name="$name" spec.class_name=sh \
        spec.detached=true spec.max_restarts=2 spec.command=/bin/sh spec.args+=-c \
        spec.args+="id -un >>$DROP/$name.who; exec sleep 300" "$@" >"$TMP/$name.out" 2>&1
}
create to-root spec.labels+=host=node-r && fail "a worker of UA's job created an actor on root's node"
assert_grep "$TMP/to-root.out" "^code=7 permission denied: an actor that a worker of job 1 creates runs as that job's user '$UA' only (on nodes labelled hv.run_as=$UA), and none of the 3 live nodes is one with labels host=node-r"
create to-b spec.labels+=host=node-b && fail "a worker of UA's job created an actor on UB's node"
assert_grep "$TMP/to-b.out" "^code=7 permission denied: .* none of the 3 live nodes is one with labels host=node-b"
create as-root spec.labels+=hv.run_as=root && fail "a worker of UA's job created an actor as root"
assert_grep "$TMP/as-root.out" "^code=7 permission denied: the workers of job 1 run as '$UA': an actor one of them creates runs as that user only, not 'root'"
# Its own user: placed on node-a, as UA, and held there.
create mine || fail "job 1's worker could not create an actor of its own: $(cat "$TMP/mine.out")"
assert_grep "$TMP/mine.out" "labels=hv.run_as=$UA"
wait_for 20 test -s "$DROP/mine.who" || fail "the actor did not start"
[ "$(cat "$DROP/mine.who")" = "$UA" ] || fail "the actor ran as '$(cat "$DROP/mine.who")', not $UA"
"$BIN/hvctl" --head "$HEAD" actor mine >"$TMP/mine.show" 2>&1 || fail "hvctl actor mine"
assert_grep "$TMP/mine.show" "node-a"
"$BIN/hvctl" --head "$HEAD" kill-actor mine --restart >"$TMP/restart.out" 2>&1 || fail "kill-actor --restart"
wait_for 20 sh -c "[ \$(wc -l <'$DROP/mine.who') -ge 2 ]" || fail "the actor did not restart"
[ "$(sort -u "$DROP/mine.who")" = "$UA" ] || fail "after its restart the actor ran as '$(cat "$DROP/mine.who")'"
sleep 1
for n in to-root to-b as-root; do
    [ -e "$DROP/$n.who" ] && fail "the refused actor $n ran as $(cat "$DROP/$n.who")"
done
# A client token is not held: it places an actor by labels, as that node runs workers.
"$BIN/hvctl" --head "$HEAD" actor create --class sh --name ops --label host=node-r -- /bin/sh -c \
    "id -un >>$DROP/ops.who; exec sleep 300" >"$TMP/ops.out" 2>&1 || fail "the client could not create"
wait_for 20 test -s "$DROP/ops.who" || fail "the client's actor did not start"
[ "$(cat "$DROP/ops.who")" = root ] || fail "the client's actor on node-r ran as $(cat "$DROP/ops.who")"
# The label is the agent's own.
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name x --labels hv.run_as=root \
    --work-dir "$TMP/agent-x" >/dev/null 2>"$TMP/x.err" && fail "hvagent took --labels hv.run_as"
assert_grep "$TMP/x.err" "hv.run_as is the agent's own label"
pass "an actor of a job's worker runs only as its job's user; the refusals say why"
