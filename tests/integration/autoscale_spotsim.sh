#!/bin/sh
# The autoscaler on the simulated preemptible cloud (issue "Autoscaler", items 3, 5 and 7):
#  - with a preemption every 4 s (most with a notice, which the agent turns into a drain; some
#    without, which kill the instance with its workers), an elastic job completes and trains
#    every sample exactly once per epoch;
#  - the head is SIGKILLed mid-run and restarted: it adopts its instances and neither loses nor
#    launches any of them twice (every launch event names a new instance; every live instance
#    has exactly one agent);
#  - the cost report: hvsubmit's last line and `hvctl cost --job` show the spot time, its cost
#    (a quarter of on-demand at these prices), and the preemptions the job survived.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
HV_LISTEN=127.0.0.1:$(free_port)
# Preemptions from a trace (so that CI sees the same run every time): a notice every few
# seconds, two of them without notice. A restarted head replays it from its own start.
cat >"$TMP/trace.txt" <<'TRACE'
# time_s type event (from 8 s on, once the job has grown onto its nodes, also under ASan)
8 spot preempt
12 spot kill
16 spot preempt
20 spot preempt
24 spot kill
28 spot preempt
TRACE
start_elastic_head "autoscaler:" "  provider: spot-sim" "  min_nodes: 0" "  max_nodes: 4" \
    "  idle_timeout_s: 60" "  launch_timeout_s: 30" "  node_types:" \
    "    spot: {slots: 2, preemptible: true, price_per_hour: 0.10, ondemand_price_per_hour: 0.40}" \
    "  spot_sim:" "    seed: 7" "    boot_min_ms: 200" "    boot_max_ms: 600" "    notice_s: 2" \
    "    trace: $TMP/trace.txt"
n_ev() { ev | grep -c -- "$1"; }

# 8 epochs of about 2.5 s; resets and rollbacks are expected, so allow many; a node taken away
# is not this job's fault: no blacklisting. Rank 0 also appends its epoch lines to a file: a
# kill without notice right after rank 0 printed a line can lose it from the log stream (the
# agent dies with it unread), which is no fault of the training.
submit spot -np 2 --min-np 2 --max-np 6 --max-resets 200 --elastic-timeout 60 \
    --blacklist-cooldown 0:0 -- --epochs 8 --step-delay-ms 30 --epoch-log "$TMP/spot.epochs"
wait_for 60 sh -c "[ \$(\"$BIN/hvctl\" --head '$HEAD' events --limit 5000 2>/dev/null | grep -c autoscaler.preempted) -ge 1 ]" \
    || fail "no preemption within 60 s"

# SIGKILL the head mid-run and bring it back on the same address.
before=$(n_ev "autoscaler.launch ")
restart_head 0
assert_grep "$TMP/head.err" "instances adopted" "the restarted head must adopt its instances"

ran_exact spot 8 300 "the job did not survive the preemptions"
ev >"$TMP/ev.txt"
pre=$(grep -c "autoscaler.preempted" "$TMP/ev.txt"); notices=$(grep -c "autoscaler.notice" "$TMP/ev.txt")
echo "preemptions: $pre, notices: $notices, launches: $(grep -c 'autoscaler.launch ' "$TMP/ev.txt") ($before before the SIGKILL)" >&2
[ "$pre" -ge 2 ] || fail "expected at least 2 preemptions during the run, saw $pre"
[ "$notices" -ge 1 ] || fail "expected a preemption notice (a drain)"

# No instance launched twice: each launch event names a distinct instance, and each instance
# the head thinks alive has exactly one agent process.
dups=$(sed -n 's/.*autoscaler.launch .*instance \([0-9]*\).*/\1/p' "$TMP/ev.txt" | sort | uniq -d)
[ -z "$dups" ] || fail "instances launched twice: $dups"
D=$TMP/data/instances
for tok in "$D"/*.token; do
    [ -f "$tok" ] || continue
    id=$(basename "$tok" .token)
    n=$(pgrep -f -- "--work-dir $D/$id( |\$)" | wc -l)
    [ "$n" -le 1 ] || fail "instance $id has $n agents"
done

# The cost: hvsubmit's line and hvctl cost agree, spot costs a quarter of on-demand.
assert_grep "$TMP/spot.err" "job 1 cost .* instance-s (spot .*on demand .* (75% less); [1-9][0-9]* preemptions\? survived"
"$BIN/hvctl" --head "$HEAD" --json cost --job 1 >"$TMP/cost.json" || fail "hvctl cost --job 1 failed"
/usr/bin/python3 - "$TMP/cost.json" <<'PY' || fail "the job's cost report is wrong: $(cat "$TMP/cost.json")"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["job_id"] == 1 and c["state"] == "succeeded", c
t = {l["type"]: l for l in c["types"]}
assert list(t) == ["spot"], t
assert c["instance_seconds"] > 5, c
assert abs(c["cost"] * 4 - c["ondemand_cost"]) < 1e-6, c
assert abs(c["cost"] - c["instance_seconds"] * 0.10 / 3600) < 1e-6, c
assert c["preemptions"] >= 1, c
PY
"$BIN/hvctl" --head "$HEAD" cost >"$TMP/cost.txt" || fail "hvctl cost failed"
assert_grep "$TMP/cost.txt" "^spot "
# spot-sim goes on preempting the idle instances after the job: the cluster's count lies between
# the events read before the report and those read after it.
pre_after=$(ev | grep -c "autoscaler.preempted")
assert_grep "$TMP/cost.txt" "^total: cost .*(75% less); [0-9]* preemptions; "
n=$(sed -n 's/^total: .*; \([0-9]*\) preemptions; .*/\1/p' "$TMP/cost.txt")
[ "$n" -ge "$pre" ] && [ "$n" -le "$pre_after" ] ||
    fail "hvctl cost counts $n preemptions; the events say $pre before the report, $pre_after after"
pass "an elastic job completes on spot-sim through $pre preemptions and a head SIGKILL; its cost is reported"
