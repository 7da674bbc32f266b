#!/bin/sh
# On-demand handed back when spot returns (issue 28 §4, autoscaler rule 7): spot has no capacity
# at first, so its launch is refused, spot is set aside and the job's node is bought on demand;
# once the market has spot capacity again (a trace raises it) and the set-aside ended, the
# autoscaler buys a spot node first, and only when it has joined drains the on-demand node (its
# elastic job moves its workers off it, as on a notice) and terminates it once empty. The job
# completes with every sample trained exactly once per epoch, and the cost report shows the
# on-demand instance ended before the job did.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
cat >"$TMP/trace.txt" <<'TRACE'
# no spot at first; room for one spot node from 6 s on
0 spot capacity 0
6 spot capacity 1
TRACE
start_elastic_head "autoscaler:" "  provider: spot-sim" "  max_nodes: 1" \
    "  idle_timeout_s: 60" "  launch_timeout_s: 30" "  max_launch_failures: 1" "  set_aside_s: 3" \
    "  node_types:" \
    "    spot: {slots: 2, preemptible: true, price_per_hour: 0.10}" \
    "    ondemand: {slots: 2, price_per_hour: 0.40}" \
    "  fallback: [spot, ondemand]" \
    "  spot_sim:" "    boot_min_ms: 200" "    boot_max_ms: 500" "    trace: $TMP/trace.txt"

submit hb -np 2 --min-np 1 --max-np 2 --max-resets 50 --elastic-timeout 60 \
    --blacklist-cooldown 0:0 -- --epochs 10 --step-delay-ms 40
wait_for 30 has "autoscaler.launch .*instance [0-9]* (ondemand, node" || fail "the job's node was not bought on demand"
wait_for 60 has "autoscaler.handback" || fail "the on-demand node was not handed back"
wait_for 30 has "autoscaler.terminate .*(ondemand.*handed back" ||
    fail "the handed-back node was not terminated"
wait_submit 120
[ "$SUB_RC" -eq 0 ] || fail "the job did not complete (rc $SUB_RC): $(tail -3 "$TMP/hb.err")"
check_exact hb 10
ev >"$TMP/ev.txt"
# make before break: the spot node joined before the on-demand node was drained
j=$(grep -n "autoscaler.joined .*(spot)" "$TMP/ev.txt" | head -n 1 | cut -d: -f1)
h=$(grep -n "autoscaler.handback" "$TMP/ev.txt" | head -n 1 | cut -d: -f1)
[ -n "$j" ] && [ "$j" -lt "$h" ] || fail "the on-demand node was drained before its spot replacement joined"
assert_grep "$TMP/ev.txt" "autoscaler.handback .*(ondemand, node ondemand-[0-9]*): instance [0-9]* (ondemand) is handed back: a spot node has joined"
# only one on-demand instance ever, and it ended before the job did
[ "$(grep -c 'autoscaler.launch .*instance [0-9]* (ondemand, node' "$TMP/ev.txt")" -eq 1 ] || fail "on demand was bought more than once"
"$BIN/hvctl" --head "$HEAD" --json cost --job 1 >"$TMP/cost.json" || fail "hvctl cost --job 1 failed"
/usr/bin/python3 - "$TMP/cost.json" <<'PY' || fail "the job's cost report is wrong: $(cat "$TMP/cost.json")"
import json, sys
c = json.load(open(sys.argv[1]))
t = {l["type"]: l for l in c["types"]}
assert set(t) == {"spot", "ondemand"}, t
assert t["spot"]["instance_seconds"] > 0 and t["ondemand"]["instance_seconds"] > 0, t
PY
pass "the on-demand node bought in a spot outage was handed back for spot, make before break, and the job completed exact"
