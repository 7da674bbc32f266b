#!/bin/sh
# hvctl drain and undrain with several nodes in one call, through the real binaries: 4 one-slot
# agents, -np 4 --min-np 1 --max-np 4. After epoch 0, `hvctl drain node-b node-c node-d`: the
# three nodes leave in one round (g2 of 1 worker, no rollback), not in three. After epoch 1,
# `hvctl undrain node-b node-c`: the job grows back to 3 at its next check (g3). Exit 0, every
# epoch exact. A node named twice is a usage error (64); a list with an unknown node (66) or, for
# undrain, a node that is not draining (65) changes nothing.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
start_elastic_head
for n in a b c d; do start_agent "node-$n" 1; done
submit run -np 4 --min-np 1 --max-np 4 -- --epochs 3 --step-delay-ms 15
wait_epoch run 0
ctl() { "$BIN/hvctl" --head "$HEAD" "$@"; }
ctl drain node-b node-c node-b >"$TMP/dup.out" 2>"$TMP/dup.err"; rc=$?
[ $rc -eq 64 ] || fail "a node named twice should be a usage error (64), got $rc"
assert_grep "$TMP/dup.err" "node 'node-b' is named twice"
ctl drain node-b node-zz >"$TMP/unk.out" 2>"$TMP/unk.err"; rc=$?
[ $rc -eq 66 ] || fail "an unknown node should exit 66, got $rc"
assert_grep "$TMP/unk.err" "no node named 'node-zz' (nothing was changed)"
ctl undrain node-a node-b >"$TMP/und.out" 2>"$TMP/und.err"; rc=$?
[ $rc -eq 65 ] || { cat "$TMP/und.err"; fail "undrain of nodes that are not draining should exit 65, got $rc"; }
assert_grep "$TMP/und.err" "node node-a is alive, not draining (nothing was changed)"
ctl nodes >"$TMP/nodes0.txt"
grep -q draining "$TMP/nodes0.txt" && fail "a refused drain changed a node"
ctl drain node-b node-c node-d --reason "resize to 1" >"$TMP/drain.out" || fail "hvctl drain of 3 nodes failed"
cat "$TMP/drain.out"
[ "$(grep -c ': draining,' "$TMP/drain.out")" -eq 3 ] || fail "hvctl drain should print 3 draining nodes"
wait_epoch run 1
ctl undrain node-b node-c >"$TMP/undrain.out" || fail "hvctl undrain of 2 nodes failed"
[ "$(grep -c ': alive,' "$TMP/undrain.out")" -eq 2 ] || { cat "$TMP/undrain.out"; fail "hvctl undrain should print 2 alive nodes"; }
wait_submit
[ "$SUB_RC" -eq 0 ] || fail "the job should succeed, hvsubmit exited $SUB_RC"
check_exact run 3
rounds 1 >"$TMP/rounds"
cat "$TMP/rounds"
sed -n 1p "$TMP/rounds" | grep -q '^1 4 - node-a start' || fail "g1 should be 4 workers"
sed -n 2p "$TMP/rounds" | grep -q '^2 1 - node-a drain' || fail "g2 should be the one round of the drain: 1 worker, no rollback"
sed -n 3p "$TMP/rounds" | grep -q '^3 3 - node-a grow' || fail "g3 should grow back to 3 workers"
[ "$(wc -l <"$TMP/rounds")" -eq 3 ] || fail "expected 3 rounds"
pass "several nodes drained in one round, undrained together"
