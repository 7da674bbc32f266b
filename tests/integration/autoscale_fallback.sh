#!/bin/sh
# Fallback and set-aside on the simulated cloud (issue "Autoscaler", items 1, 2 and 7): the
# first type in the fallback order runs out of capacity, so its launch fails; the type is set
# aside and the demand goes to the next type; after set_aside_s the type is back and, once the
# simulated market has capacity again (a trace raises it), the next launch uses it. Each step is
# an event that says why.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
cat >"$TMP/trace.txt" <<'TRACE'
# spot-a has room for one instance until 6 s after the head starts, then for three
0 spot-a capacity 1
6 spot-a capacity 3
TRACE
start_head "autoscaler:" "  provider: spot-sim" "  max_nodes: 4" "  idle_timeout_s: 60" \
    "  launch_timeout_s: 20" "  max_launch_failures: 1" "  set_aside_s: 4" "  node_types:" \
    "    spot-a: {slots: 2, preemptible: true, price_per_hour: 0.10}" \
    "    spot-b: {slots: 2, preemptible: true, price_per_hour: 0.15}" \
    "  fallback: [spot-a, spot-b]" \
    "  spot_sim:" "    boot_min_ms: 100" "    boot_max_ms: 300" "    trace: $TMP/trace.txt"

# 4 workers need 2 nodes: spot-a gets one, its second launch fails, spot-b takes over.
"$BIN/hvsubmit" --head "$HEAD" -np 4 "$EX/sleeper" 12 >"$TMP/a.out" 2>"$TMP/a.err" &
SUB_A=$!; PIDS="$PIDS $SUB_A"
wait_for 30 has "autoscaler.type_aside" || fail "spot-a was not set aside after its failed launch"
wait_for 30 has "autoscaler.launch .*(spot-b" || fail "the demand did not fall back to spot-b"
wait_for 30 alive_nodes_is 2 || fail "the job's 2 nodes did not join"
ev >"$TMP/ev1.txt"
assert_grep "$TMP/ev1.txt" "autoscaler.launch_failed .*(spot-a): launch failed: spot-sim: no capacity for type spot-a" "the failed launch must say why"
assert_grep "$TMP/ev1.txt" "type spot-a set aside for 4 s after 1 launch failures" "the set-aside must say why"

# After 4 s spot-a is back; by then (6 s) the market has room: a new demand launches spot-a.
wait_for 30 has "autoscaler.type_back" || fail "spot-a did not come back after set_aside_s"
wait_for 20 sh -c "[ \$(\"$BIN/hvctl\" --head '$HEAD' events --limit 1000 | sed -n 's/.*trace at \\([0-9]*\\) s: capacity of spot-a is now 3.*/\\1/p' | wc -l) -ge 1 ]" \
    || fail "the trace's capacity change did not happen"
"$BIN/hvsubmit" --head "$HEAD" -np 2 "$EX/sleeper" 1 >"$TMP/b.out" 2>"$TMP/b.err" \
    || fail "the second job failed: $(tail -3 "$TMP/b.err")"
ev >"$TMP/ev2.txt"
# The order a user reads: failure, set aside, fallback, back, retry that joins.
/usr/bin/python3 - "$TMP/ev2.txt" <<'PY' || fail "the events are not in the expected order"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
def first(pat, after=-1):
    for i, l in enumerate(lines):
        if i > after and re.search(pat, l):
            return i
    sys.exit("missing after line %d: %s" % (after, pat))
f = first(r"autoscaler\.launch_failed .*\(spot-a\)")
a = first(r"autoscaler\.type_aside", f - 1)
b = first(r"autoscaler\.launch .*\(spot-b", a)
back = first(r"autoscaler\.type_back", b)
retry = first(r"autoscaler\.launch .*\(spot-a", back)
m = re.search(r"instance (\d+) \(spot-a", lines[retry])
first(r"autoscaler\.joined .*instance %s \(spot-a\)" % m.group(1), retry)
PY
wait "$SUB_A" || fail "the first job failed: $(tail -3 "$TMP/a.err")"
pass "a type out of capacity is set aside, the demand falls back, and the type is used again after its cooldown"
