#!/bin/sh
# Make before break at the job level, with the head's default fleet policy (its resize interval
# and payback rule on), on the simulated spot cloud: a 2-worker elastic job runs on two spot
# nodes; one gets a preemption notice (8 s to go), the autoscaler buys its replacement at once,
# and the job takes the replacement while the noticed member still trains; the noticed member
# leaves after (in that round or at its notice's end): the job never runs below 2 workers.
# (Before, a job with a member on a noticed node was frozen for the fleet policy: the replacement
# stayed idle until the noticed member left, 2 s before its node went, and the job ran on one
# worker until a later round grew it; in the 20-seed spot benchmark jobs fell to 1 or 2 of 4
# workers while their replacements sat idle.) The job ends 0, every epoch exact, the noticed
# member left without a failure.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
printf '# time_s type event: a notice at 5 s, the node taken 8 s later\n5 spot preempt\n' >"$TMP/trace.txt"
start_elastic_head "autoscaler:" "  provider: spot-sim" "  min_nodes: 0" "  max_nodes: 2" \
    "  idle_timeout_s: 60" "  launch_timeout_s: 30" "  node_types:" \
    "    spot: {slots: 1, preemptible: true, price_per_hour: 0.10}" \
    "  spot_sim:" "    seed: 3" "    boot_min_ms: 200" "    boot_max_ms: 400" "    notice_s: 8" \
    "    trace: $TMP/trace.txt"
submit_logged rp -np 2 --min-np 1 --max-np 2 --max-resets 100 --blacklist-cooldown 0:0 -- \
    --epochs 12 --step-delay-ms 20
ran_exact rp 12 120 "a notice with a replacement must not fail the job"
ev >"$TMP/ev.txt"
assert_grep "$TMP/ev.txt" "autoscaler.notice" "the trace's notice must come"
notice_at=$(grep -m1 'autoscaler.notice' "$TMP/ev.txt" | awk '{ print $3 }')
[ "$(grep -c 'autoscaler.launch ' "$TMP/ev.txt")" -ge 3 ] || fail "the replacement was not bought"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
# the job was at 2 before the notice, and every round after that holds 2 workers or more
grep -q '^[0-9]* 2 ' "$TMP/rounds" || fail "the job never ran at 2 workers"
awk 'seen && $2 < 2 { exit 1 } $2 >= 2 { seen = 1 }' "$TMP/rounds" ||
    fail "the job ran below 2 workers after the notice (notice at $notice_at): its replacement was not taken in time"
grep -q '"kind": "worker.fail"' "$TMP/events-1.json" && fail "the noticed member counted as a failure"
[ "$(grep -c '"kind": "worker.left"' "$TMP/events-1.json")" -ge 1 ] || fail "the noticed member should have left"
pass "elastic_notice_replace: a noticed member's replacement is taken at once, the job stays at 2"
