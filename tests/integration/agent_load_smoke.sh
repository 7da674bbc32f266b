#!/bin/sh
# agent_load smoke test: tests/perf/agent_load plays 5 agents against a real hvhead for 3 s. Every
# simulated agent joins, opens its Session and gets heartbeat answers; `hvctl nodes` lists all 5
# alive while they run; agent_load stops by itself and reports no lost session. Guards the tool
# that tests/perf/head_load.sh relies on.
. "$HV_SRC_DIR/tests/lib.sh"
[ -x "$BIN/agent_load" ] || { echo "SKIP: $BIN/agent_load not built"; exit 77; }
hv_setup
start_head
"$BIN/agent_load" --head "$HEAD" --token "$TOKEN" --agents 5 --duration 3 --ramp-ms 200 \
    --prefix smoke >"$TMP/load.out" 2>"$TMP/load.err" &
lp=$!
PIDS="$PIDS $lp"
wait_for 5 grep -q 'all 5 sessions established' "$TMP/load.out" \
    || fail "agent_load did not establish 5 sessions"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes.out" 2>&1 || fail "hvctl nodes failed"
alive=$(awk 'index($1, "smoke-") == 1 && $3 == "alive"' "$TMP/nodes.out" | wc -l)
[ "$alive" -eq 5 ] ||
    fail "hvctl nodes lists $alive simulated nodes alive, want 5: $(cat "$TMP/nodes.out")"
wait_for 10 sh -c "! kill -0 $lp 2>/dev/null" || fail "agent_load did not stop after its duration"
wait $lp; rc=$?
[ $rc -eq 0 ] || fail "agent_load exited $rc, want 0"
assert_grep "$TMP/load.out" "agents=5 joined=5 established=5 lost=0" "agent_load summary"
replies=$(sed -nE 's/.* replies=([0-9]+) .*/\1/p' "$TMP/load.out")
# heartbeat_ms is 200 in lib.sh's config: about 15 beats per agent in 3 s
[ "${replies:-0}" -ge 25 ] ||
    fail "only ${replies:-0} heartbeat replies for 5 agents in 3 s, want >= 25"
pass "agent_load: 5 sessions established, listed alive, $replies heartbeat replies"
