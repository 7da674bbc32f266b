#!/bin/sh
# Store first: a node state that cannot be stored is not acted on (issue 15 §3). On a full data
# directory (a real 24 MiB tmpfs; skipped where mount is not permitted) `hvctl drain` exits 75
# with "the head could not store node ... as draining", the node stays alive (hvctl nodes, and
# its agent is not told to drain), and the head logs sqlite's words. Once there is room again
# the same drain works. `hvctl node revoke` on a full disk: the same, the agent keeps running.
# And an upgrade keeps revocations: the old revocations file is imported at start and renamed.
# Events wait for the store: node-b's agent is killed on the full disk (its session closes: a
# node.suspect event); the event is not in the log while it cannot be written, and appears,
# before node-b's death, once there is room again.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
data_on_tmpfs 24m hvtest-data
printf '99 1\n' >"$TMP/data/revoked_nodes" # as an older head kept them
start_head
[ -f "$TMP/data/revoked_nodes.imported" ] && [ ! -e "$TMP/data/revoked_nodes" ] \
    || fail "the old revocations file was not imported and renamed: $(ls "$TMP/data")"
assert_grep "$TMP/head.err" "revoked_nodes: 1 revoked node credentials imported into $TMP/data/state.db"
start_agent node-a 1
node_alive() { "$BIN/hvctl" --head "$HEAD" nodes 2>/dev/null | awk '$1 == "node-a" { print $3 }' | grep -qx alive; }
wait_for 10 node_alive || fail "node-a did not join: $(cat "$TMP/agent-node-a.err")"
start_agent node-b 1
wait_for 10 sh -c "\"$BIN/hvctl\" --head \"$HEAD\" nodes | grep -q '^node-b '" || fail "node-b did not join"

dd if=/dev/zero of="$TMP/data/filler" bs=64k 2>/dev/null
"$BIN/hvctl" --head "$HEAD" drain node-a --reason full-disk >"$TMP/drain.out" 2>"$TMP/drain.err"
rc=$?
[ $rc -eq 75 ] || fail "hvctl drain on a full disk exited $rc, want 75: $(cat "$TMP/drain.out" "$TMP/drain.err")"
assert_grep "$TMP/drain.err" "the head could not store node node-a as draining: .*full.*; node node-a was not drained"
node_alive || fail "node-a is not alive after a drain that was not stored: $("$BIN/hvctl" --head "$HEAD" nodes 2>&1)"
assert_grep "$TMP/head.err" "HV-NODE-NOT-STORED.*the head could not store node node-a as draining: .*full.*; node node-a stays alive"
if grep -q "node.drain\|is draining" "$TMP/head.err" "$TMP/agent-node-a.err"; then
    fail "the drain was acted on although it was not stored: $(grep "node.drain\|is draining" "$TMP/head.err" "$TMP/agent-node-a.err")"
fi

"$BIN/hvctl" --head "$HEAD" node revoke node-a >"$TMP/revoke.out" 2>"$TMP/revoke.err"
rc=$?
[ $rc -eq 75 ] || fail "hvctl node revoke on a full disk exited $rc, want 75: $(cat "$TMP/revoke.out" "$TMP/revoke.err")"
assert_grep "$TMP/revoke.err" "the head could not store the revocation of node node-a: .*full.*; node node-a was not revoked"
sleep 0.5
kill -0 "$(agent_pid node-a)" && node_alive \
    || fail "node-a's agent stopped after a revocation that was not stored: $(tail -n 3 "$TMP/agent-node-a.err")"
assert_grep "$TMP/head.err" "cannot store the revocation of node node-a"

kill -KILL "$(agent_pid node-b)"
wait_for 10 grep -q "node.suspect job=0 node=2" "$TMP/head.err" || fail "the head did not see node-b's session close"
"$BIN/hvctl" --head "$HEAD" events >"$TMP/events-full.out" 2>&1
if grep -q "node node-b is suspected lost" "$TMP/events-full.out"; then
    fail "an event is in the log although the disk is full: $(grep suspected "$TMP/events-full.out")"
fi

rm -f "$TMP/data/filler"
events_have() { "$BIN/hvctl" --head "$HEAD" events >"$TMP/events.out" 2>&1 && grep -q "$1" "$TMP/events.out"; }
wait_for 10 events_have "node node-b is suspected lost" \
    || fail "the event written while the disk was full was lost: $(cat "$TMP/events.out")"
wait_for 15 events_have "node node-b is dead" || fail "node-b's death was not recorded: $(cat "$TMP/events.out")"
s_line=$(grep -n "node node-b is suspected lost" "$TMP/events.out" | head -n 1 | cut -d: -f1)
d_line=$(grep -n "node node-b is dead" "$TMP/events.out" | head -n 1 | cut -d: -f1)
[ "$s_line" -lt "$d_line" ] || fail "the waiting event was written out of order: $(cat "$TMP/events.out")"
"$BIN/hvctl" --head "$HEAD" drain node-a --reason room-again >"$TMP/drain2.out" 2>&1 \
    || fail "hvctl drain with room again failed: $(cat "$TMP/drain2.out")"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.out" 2>&1
grep -q "^node-a .*draining" "$TMP/nodes.out" || awk '$1 == "node-a"' "$TMP/nodes.out" | grep -q draining \
    || fail "node-a is not draining after a stored drain: $(cat "$TMP/nodes.out")"
pass
