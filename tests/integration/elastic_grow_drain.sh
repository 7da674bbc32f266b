#!/bin/sh
# Elastic Horovod's scenario, through the real binaries: A(2); -np 2 --min-np 2 --max-np 4; B(2)
# joins after epoch 0; A gets SIGTERM (the cloud's preemption notice) after epoch 1. The job
# ends 0 with rounds g1 size 2, g2 size 4 (added), g3 size 2 (drained, rank 0 on B), neither
# reset rolls back, A's workers leave without failing and A's agent exits once they are gone,
# and every epoch processes each sample exactly once. `hvctl events --json` records every round.
# The same run with --max-resets 1 fails after g2 with the reset-limit reason.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
start_elastic_head "fleet:" "  resize_interval_ms: 0" # growth as soon as B joins, as before the fleet policy held resizes apart
start_agent node-a 2 --drain-deadline 60
submit run -np 2 --min-np 2 --max-np 4 -- --epochs 3 --step-delay-ms 15
wait_epoch run 0
start_agent node-b 2
wait_epoch run 1
kill -TERM "$(agent_pid node-a)"
wait_submit
[ "$SUB_RC" -eq 0 ] || fail "the job should succeed, hvsubmit exited $SUB_RC"
check_exact run 3
rounds 1 >"$TMP/rounds"
cat "$TMP/rounds"
[ "$(wc -l <"$TMP/rounds")" -eq 3 ] || fail "expected 3 rounds"
sed -n 1p "$TMP/rounds" | grep -q '^1 2 - node-a start' || fail "g1 should be 2 workers on node-a"
sed -n 2p "$TMP/rounds" | grep -q '^2 4 - node-a grow:' || fail "g2 should be 4 workers, added, no rollback"
sed -n 3p "$TMP/rounds" | grep -q '^3 2 - node-b drain: node node-a' || fail "g3 should be 2 workers after the drain, rank 0 on node-b, no rollback"
round_json_ok 1 || fail "round events lack fields"
grep -q '"kind": "worker.fail"' "$TMP/events-1.json" && fail "a drained worker counted as a failure"
[ "$(grep -c '"kind": "worker.left"' "$TMP/events-1.json")" -eq 2 ] || fail "both workers of node-a should have left"
epoch_lines run | grep -q '^epoch=2 size=2 generation=3 rank0=node-b' || fail "epoch 2 should run on node-b in g3"
# The drained agent exits by itself once its workers are gone (exit 0).
wait_for 20 sh -c "! kill -0 $(agent_pid node-a) 2>/dev/null" || fail "the drained agent did not exit"
wait "$(agent_pid node-a)"; [ $? -eq 0 ] || fail "the drained agent should exit 0"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job.txt"
assert_grep "$TMP/job.txt" "GENERATION: 3 (2 workers)"
assert_grep "$TMP/job.txt" "RESETS:     2"

# --max-resets 1: the same on node-b (A's role now) and node-c; the drain would be reset 2.
submit lim -np 2 --min-np 2 --max-np 4 --max-resets 1 -- --epochs 3 --step-delay-ms 15
wait_epoch lim 0
start_agent node-c 2
wait_epoch lim 1
kill -TERM "$(agent_pid node-b)"
wait_submit
[ "$SUB_RC" -ne 0 ] || fail "the job should fail past --max-resets 1"
# The drain's words name the node when its notice comes first, or the workers leaving it when
# the grow round onto node-c had already opened (make before break): either says why.
assert_grep "$TMP/lim.err" "reset 2 was needed (drain: " "hvsubmit must say why"
grep -Eq "reset 2 was needed \(drain: (node node-b|2 workers on draining nodes)" "$TMP/lim.err" \
    || fail "hvsubmit must name the drain: $(grep 'reset 2' "$TMP/lim.err")"
assert_grep "$TMP/lim.err" "but --max-resets is 1"
pass "grow at a check, drain without rollback, rounds recorded, reset limit"
