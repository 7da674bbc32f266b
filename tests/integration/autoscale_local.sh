#!/bin/sh
# The autoscaler with the local provider (issue "Autoscaler", items 2, 3 and 7):
#  - the head keeps the cluster at its minimum (1 node) by starting an agent that enrolls with
#    its own instance credential;
#  - an elastic job (-np 2, max-np 6) makes the head buy the nodes it needs; the job grows onto
#    them and trains every sample exactly once per epoch;
#  - the head is SIGKILLed and restarted: it adopts its instances, launches none twice;
#  - after the job the idle nodes go away after the idle timeout, back to the minimum;
#  - a job larger than the cluster is accepted (the autoscaler can grow to it) and runs;
#  - an instance credential admits only its own live instance.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
HV_LISTEN=127.0.0.1:$(free_port)
start_elastic_head "autoscaler:" "  provider: local" "  min_nodes: 1" "  max_nodes: 3" \
    "  idle_timeout_s: 4" "  launch_timeout_s: 30" "  local:" "    slots: 2"
launches() { "$BIN/hvctl" --head "$HEAD" events --limit 1000 2>/dev/null | grep -c "autoscaler.launch "; }

wait_for 20 alive_nodes_is 1 || fail "the autoscaler did not bring the cluster to its minimum"
ev_has() { "$BIN/hvctl" --head "$HEAD" events --limit 1000 2>/dev/null | grep -q -- "$1"; }
wait_for 10 ev_has "autoscaler.joined" || fail "no autoscaler.joined event"
ev_has "keeps at least 1 nodes" || fail "the launch must say why"
D=$TMP/data/instances
[ "$(stat -c %a "$D/1.token")" = 600 ] || fail "the instance token file must be 0600"
cp "$D/1.token" "$TMP/inst1.token"

# An instance credential under another node name, and a forged one, are refused.
"$BIN/hvagent" join "$HEAD" --token-file "$TMP/inst1.token" --name intruder --slots 1 \
    --work-dir "$TMP/agent-intruder" >"$TMP/intruder.out" 2>&1 && fail "a stolen instance credential joined under another name"
assert_grep "$TMP/intruder.out" "permission denied"
echo hvi_1_00000000000000000000000000000000 >"$TMP/forged.token"; chmod 600 "$TMP/forged.token"
"$BIN/hvagent" join "$HEAD" --token-file "$TMP/forged.token" --name local-1 --slots 1 \
    --work-dir "$TMP/agent-forged" >"$TMP/forged.out" 2>&1 && fail "a forged instance credential joined"
assert_grep "$TMP/forged.out" "not authenticated"

# An elastic job grows the cluster to the nodes it needs.
submit grow -np 2 --min-np 2 --max-np 6 -- --epochs 4 --step-delay-ms 15
wait_for 60 alive_nodes_is 3 || fail "the autoscaler did not grow the cluster to 3 nodes"
wait_for 90 grep -q "size=6 " "$TMP/grow.out" || fail "the job did not grow to 6 workers"
[ "$(launches)" -eq 3 ] || fail "3 launches expected before the restart, saw $(launches)"
for i in 2 3; do cp "$D/$i.token" "$TMP/inst$i.token"; done

# SIGKILL the head mid-run: the instances are adopted, none launched twice.
restart_head 0
assert_grep "$TMP/head.err" "3 instances adopted" "the restarted head must adopt its 3 instances"
ran_exact grow 4 240 "the growing job failed"
[ "$(launches)" -eq 3 ] || fail "the restarted head launched again: $(launches) launches"

# Idle nodes go after the idle timeout, down to the minimum; their agents exit.
wait_for 60 alive_nodes_is 1 || fail "the idle nodes were not given back"
one_agent() { [ "$(pgrep -f -- "--work-dir $D/" | wc -l)" -eq 1 ]; }
wait_for 20 one_agent || fail "the given-back agents still run: $(pgrep -a -f -- "--work-dir $D/")"
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev1.txt" 2>&1
assert_grep "$TMP/ev1.txt" "idle for .* (idle timeout 4 s)" "the termination must say why"

# A fixed-size job larger than the cluster is accepted and runs on bought nodes.
"$BIN/hvsubmit" --head "$HEAD" -np 5 "$EX/hello" >"$TMP/big.out" 2>"$TMP/big.err" \
    || fail "-np 5 on a 2-slot cluster that may grow to 6 failed: $(tail -3 "$TMP/big.err")"
[ "$(grep -c 'hello from rank' "$TMP/big.out")" -eq 5 ] || fail "the -np 5 job did not run 5 ranks"
# Beyond what the autoscaler may ever buy: refused at once, saying so.
"$BIN/hvsubmit" --head "$HEAD" -np 7 "$EX/hello" >/dev/null 2>"$TMP/huge.err" && fail "-np 7 accepted"
assert_grep "$TMP/huge.err" "autoscaler"

# A given-back instance's credential admits nobody any more, not even under its own name.
for i in 2 3; do
    "$BIN/hvctl" --head "$HEAD" nodes | grep -q "^local-$i .* alive" && continue
    [ -f "$D/$i.token" ] && fail "instance $i ended but its token file is still there"
    "$BIN/hvagent" join "$HEAD" --token-file "$TMP/inst$i.token" --name "local-$i" --slots 2 \
        --work-dir "$TMP/agent-old$i" >"$TMP/old$i.out" 2>&1 && fail "an ended instance's credential joined"
    assert_grep "$TMP/old$i.out" "permission denied"
done
pass "the local autoscaler grows to the demand, survives a head SIGKILL, shrinks back when idle"
