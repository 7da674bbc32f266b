#!/bin/sh
# hvagent --run-as USER runs workers as that user: /usr/bin/id in a job says so, the worker owns
# its job directory, and it cannot read the agent's environment or the head's data directory; a
# work dir that user cannot reach is refused at start.
# Needs root and useradd (skipped with 77 otherwise); the user is created and removed here.
. "$HV_SRC_DIR/tests/lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v useradd >/dev/null || { echo "SKIP: no useradd"; exit 77; }
U=hvrun$$
useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$U" 2>/dev/null \
    || { echo "SKIP: useradd failed"; exit 77; }
hv_setup
trap 'hv_cleanup; userdel "$U" 2>/dev/null' EXIT
chmod 755 "$TMP" # the work dir below it must be reachable by the workers' user
UID_U=$(id -u "$U")
start_head
start_agent node-a 1 --run-as "$U"
cat >"$TMP/who.sh" <<'EOF'
echo "uid=$(id -u) user=$USER"
echo "owner=$(stat -c %U .)"
if cat /proc/$PPID/environ >/dev/null 2>&1; then echo "parent-env=readable"; else echo "parent-env=denied"; fi
if ls "$1" >/dev/null 2>&1; then echo "data=readable"; else echo "data=denied"; fi
EOF
"$BIN/hvsubmit" -np 1 --file "$TMP/who.sh" /bin/sh who.sh "$TMP/data" >"$TMP/who.out" 2>"$TMP/who.err" \
    || fail "job under --run-as failed: $(tail -3 "$TMP/who.err")"
assert_grep "$TMP/who.out" "<stdout>:uid=$UID_U user=$U$" "the worker did not run as $U"
assert_grep "$TMP/who.out" "<stdout>:owner=$U$" "the job directory is not the worker's"
assert_grep "$TMP/who.out" "<stdout>:parent-env=denied" "the worker could read the agent's environment"
assert_grep "$TMP/who.out" "<stdout>:data=denied" "the worker could read the head's data directory"
# a user that does not exist is refused at start, with its name
"$BIN/hvagent" join "$HEAD" --token-file /dev/null --run-as no-such-user-hv --name x \
    --work-dir "$TMP/agent-x" >/dev/null 2>"$TMP/x.err" && fail "--run-as an unknown user started"
assert_grep "$TMP/x.err" "no-such-user-hv"
# a work dir the user cannot reach (below a 0700 directory of root's) is refused at start, naming
# the directory in the way and the user (issue 24: it joined, then failed every worker with
# "spawn failed: Permission denied")
mkdir -m 700 "$TMP/private"
timeout 10 "$BIN/hvagent" join "$HEAD" --token "$TOKEN" --run-as "$U" --name node-y \
    --work-dir "$TMP/private/agent-y" >"$TMP/y.out" 2>"$TMP/y.err" && fail "--run-as with an unreachable work dir started"
assert_grep "$TMP/y.err" "^hvagent: --run-as $U: user $U (uid $UID_U) cannot reach the work dir $TMP/private/agent-y: $TMP/private: Permission denied"
assert_no_grep "$TMP/y.out" "joined" "the agent joined before refusing"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.out" 2>&1
assert_no_grep "$TMP/nodes.out" "node-y" "the refused agent is listed as a node"
pass "--run-as runs workers unprivileged"
