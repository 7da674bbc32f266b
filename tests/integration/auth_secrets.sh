#!/bin/sh
# Secrets stay secret (issue "Trust", item 3) and credentials can be revoked:
#  - a worker reading its agent's environment (/proc/$PPID/environ) or command line finds no join
#    token; its own environment holds only its worker secret; --token warns and is hidden.
#  - the data dir is 0700; state.db (+ -wal/-shm, which hold --env values), job logs, artifacts,
#    token and key files are 0600.
#  - hvctl does not print --env values.
#  - a client token dropped into DATA/clients/ works within seconds; deleting it revokes it.
#  - hvctl node revoke ends the node's session: its agent stops, saying why.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
# node-a gets the join token through HV_TOKEN (the way the docs recommend after --token-file)
HV_TOKEN=$TOKEN "$BIN/hvagent" join "$HEAD" --name node-a --slots 1 --work-dir "$TMP/agent-node-a" \
    >"$TMP/agent-node-a.out" 2>"$TMP/agent-node-a.err" &
APID=$!
PIDS="$PIDS $APID"
wait_for 15 grep -q joined "$TMP/agent-node-a.out" || fail "node-a did not join"
# node-b gets it on the command line: a warning, and the value is gone from its cmdline
start_agent node-b 1
BPID=$(agent_pid node-b)
assert_grep "$TMP/agent-node-b.err" "warning: --token" "--token must warn"
assert_grep "$TMP/agent-node-b.err" "token-file" "the warning must point to --token-file"
tr '\0' ' ' </proc/"$BPID"/cmdline >"$TMP/b.cmdline"
assert_no_grep "$TMP/b.cmdline" "$TOKEN" "the join token is still in the agent's command line"

# A worker looks at its parent (the agent) and at itself.
cat >"$TMP/peek.sh" <<'EOF'
echo "ppid-environ:"; tr '\0' '\n' </proc/$PPID/environ
echo "ppid-cmdline:"; tr '\0' ' ' </proc/$PPID/cmdline; echo
echo "own-env:"; env
EOF
"$BIN/hvsubmit" -np 2 --file "$TMP/peek.sh" --env DB_PASSWORD=hunter2-sekrit /bin/sh peek.sh \
    >"$TMP/peek.out" 2>"$TMP/peek.err" || fail "peek job failed: $(tail -3 "$TMP/peek.err")"
assert_grep "$TMP/peek.out" "ppid-environ:" "the worker could not read its parent's environment"
assert_no_grep "$TMP/peek.out" "$TOKEN" "a worker saw the join token"
assert_no_grep "$TMP/peek.out" "hvn_" "a worker saw a node credential"
assert_no_grep "$TMP/peek.out" "<stdout>:HV_TOKEN=" "HV_TOKEN reached a worker or stayed in the agent"
[ "$(grep -c '<stdout>:HV_WORKER_SECRET=hvw_1_' "$TMP/peek.out")" -eq 2 ] \
    || fail "each worker must have its own HV_WORKER_SECRET"
assert_no_grep "$TMP/peek.err" "hunter2-sekrit" "hvsubmit printed an --env value"

# hvctl shows the job but none of its --env values
"$BIN/hvctl" --json job 1 >"$TMP/job.json" || fail "hvctl job"
"$BIN/hvctl" job 1 >"$TMP/job.txt" || fail "hvctl job (table)"
"$BIN/hvctl" --json events --job 1 >"$TMP/ev.json" || fail "hvctl events"
for f in "$TMP/job.json" "$TMP/job.txt" "$TMP/ev.json"; do
    assert_no_grep "$f" "hunter2-sekrit" "hvctl printed an --env value ($f)"
done

# File modes: nothing in the data dir is readable by others.
D=$TMP/data
[ "$(stat -c %a "$D")" = 700 ] || fail "data dir mode $(stat -c %a "$D"), want 700"
for f in "$D"/state.db* "$D"/logs/*.log "$D"/client.token "$D"/auth.key "$D"/artifacts/*; do
    [ -f "$f" ] || continue
    m=$(stat -c %a "$f")
    [ "$m" = 600 ] || fail "$f has mode $m, want 600"
done
ls "$D"/state.db-wal >/dev/null 2>&1 || ls "$D"/state.db >/dev/null || fail "no state.db"
ls "$D"/logs/*.log >/dev/null 2>&1 || fail "no job log to check"
# and nobody but the head's user can read the --env value that sits in sqlite
if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups cat "$D"/state.db-wal >/dev/null 2>&1 \
        && fail "user nobody could read state.db-wal"
fi

# Extra client tokens: DATA/clients/NAME.token, picked up without a restart; deleting revokes.
mkdir -p "$D/clients"
echo hvc_ci-runner-0123456789abcdef >"$D/clients/ci.token"
chmod 600 "$D/clients/ci.token"
echo hvc_ci-runner-0123456789abcdef >"$TMP/ci.token"; chmod 600 "$TMP/ci.token"
wait_for 10 "$BIN/hvctl" --token-file "$TMP/ci.token" jobs || fail "a token in clients/ was not accepted"
rm "$D/clients/ci.token"
wait_for 10 sh -c "! '$BIN/hvctl' --token-file '$TMP/ci.token' jobs" || fail "a deleted client token still works"
"$BIN/hvctl" --token-file "$TMP/ci.token" jobs 2>"$TMP/ci.err" && fail "revoked client token accepted"
assert_grep "$TMP/ci.err" "not authenticated"

# Revoking a node: its session ends, its agent stops and says why; the others go on.
"$BIN/hvsubmit" -d -np 1 /bin/sleep 60 >/dev/null 2>&1 || fail "submit sleeper"
wait_for 10 workers_at_least 2 1 || fail "sleeper did not start"
SLEEPER_NODE=$("$BIN/hvctl" --json job 2 | grep -o 'node-[ab]' | head -n 1)
"$BIN/hvctl" node revoke "$SLEEPER_NODE" >"$TMP/rv.out" 2>&1 || fail "hvctl node revoke: $(cat "$TMP/rv.out")"
assert_grep "$TMP/rv.out" "revoked"
if [ "$SLEEPER_NODE" = node-a ]; then VPID=$APID; VERR=$TMP/agent-node-a.err; else VPID=$BPID; VERR=$TMP/agent-node-b.err; fi
wait_for 15 sh -c "! kill -0 $VPID" || fail "the revoked agent is still running"
wait "$VPID"; ec=$?
[ $ec -ne 0 ] || fail "the revoked agent exited 0"
assert_grep "$VERR" "no longer accepts this node's credential" "the revoked agent must say why it stops"
wait_for 10 no_workers 2 || fail "the revoked node's worker is still running"
"$BIN/hvctl" node revoke no-such-node 2>"$TMP/rv2.err" && fail "revoking an unknown node succeeded"
assert_grep "$TMP/rv2.err" "no node"
# the other node still serves
"$BIN/hvsubmit" -np 1 "$EX/hello" >"$TMP/hello.out" 2>&1 || fail "hello after the revoke failed"
pass "secrets stay out of workers, files and output; client tokens and nodes revocable"
