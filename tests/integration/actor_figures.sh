#!/bin/sh
# An actor's call figures (docs/actors.md "Calls served and latency"): a counter actor is created
# with `hvctl actor create`, called N times (some calls fail with a method error), and within a
# bounded wait `hvctl actor --json` reports the calls split right (ok / error) with a median and
# a p99; `hvctl actor` and `hvctl actors` print them. The totals survive a kill -9 of the
# actor's process (the restarted process counts from 0; the actor's totals keep counting), a
# head SIGKILL (stored in the state database), and /metrics exports hv_actor_calls_total by
# result and the service-time histogram.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
LEASE_MS=6000
start_metrics_head
pin_head_port
start_agent node-a 2

# fig NAME FIELD: a field of `hvctl actor NAME --json` (empty when the call fails).
fig() {
    "$BIN/hvctl" --head "$HEAD" actor "$1" --json 2>/dev/null |
        /usr/bin/python3 -c 'import json, sys; v = json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v)' "$2" 2>/dev/null
}
calls_are() { [ "$(fig "$1" calls_ok)" = "$2" ] && [ "$(fig "$1" calls_error)" = "$3" ]; } # NAME OK ERR
actor_is() { [ "$(fig "$1" state)" = "$2" ]; }
restarts_are() { [ "$(fig "$1" restarts)" = "$2" ] && actor_is "$1" alive; }
actor_pid() { pgrep -f "$TMP/agent-.*/actor_counter" 2>/dev/null; }
call() { "$EX/actor_call" "@$1" "$2" "${3:-}" --timeout 15000 >>"$TMP/call.out" 2>>"$TMP/call.err"; }

"$BIN/hvctl" --head "$HEAD" actor create --class counter --name figs --max-restarts 2 \
    -- "$EX/actor_counter" >"$TMP/create.out" 2>"$TMP/create.err" || fail "actor create failed"
wait_for 20 actor_is figs alive || fail "actor figs is '$(fig figs state)', not alive"
calls_are figs 0 0 || fail "a new actor reports calls: ok $(fig figs calls_ok), error $(fig figs calls_error)"
[ -z "$(fig figs service_p99_ms)" ] || fail "an actor without calls has a p99: $(fig figs service_p99_ms)"

# 7 calls that succeed, 3 that fail with a method error ("fail" returns HV_EINVAL).
for i in 1 2 3 4 5 6 7; do call figs add 1 || fail "call $i failed: $(tail -n 1 "$TMP/call.err")"; done
for i in 1 2 3; do
    call figs fail && fail "the method 'fail' succeeded"
done
wait_for 15 calls_are figs 7 3 ||
    fail "hvctl actor reports ok $(fig figs calls_ok), error $(fig figs calls_error); want 7 and 3"
p50=$(fig figs service_p50_ms)
p99=$(fig figs service_p99_ms)
/usr/bin/python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); assert 0 < a <= b < 1000, (a, b)' \
    "$p50" "$p99" || fail "the median ($p50 ms) and p99 ($p99 ms) are not a latency"
[ "$(fig figs bytes_in)" = 7 ] || fail "bytes_in $(fig figs bytes_in), want 7 (the arguments of the 7 adds, 1 byte each)"
[ "$(fig figs figures_ms)" -gt 0 ] || fail "no time of the last report"
"$BIN/hvctl" --head "$HEAD" actor figs >"$TMP/actor.out" 2>&1 || fail "hvctl actor failed"
assert_grep "$TMP/actor.out" "calls      7 served, 3 failed" "hvctl actor must print the calls"
assert_grep "$TMP/actor.out" "ms median, .* ms p99" "hvctl actor must print the latency"
"$BIN/hvctl" --head "$HEAD" actors >"$TMP/actors.out" 2>&1 || fail "hvctl actors failed"
grep -E "figs +counter +alive .* 0/2 +10 " "$TMP/actors.out" >/dev/null ||
    fail "hvctl actors does not show 10 calls for figs: $(cat "$TMP/actors.out")"

# kill -9 of its process: the new process counts from 0, the actor's totals keep counting.
old=$(actor_pid)
[ -n "$old" ] || fail "no actor_counter process under the agent"
kill -KILL "$old"
wait_for 20 restarts_are figs 1 || fail "after kill -9: restarts $(fig figs restarts), state $(fig figs state)"
calls_are figs 7 3 || fail "the restart lost the figures: ok $(fig figs calls_ok), error $(fig figs calls_error)"
for i in 1 2 3 4 5; do call figs add 1 || fail "call $i after the restart failed"; done
call figs fail && fail "the method 'fail' succeeded after the restart"
wait_for 15 calls_are figs 12 4 ||
    fail "after the restart: ok $(fig figs calls_ok), error $(fig figs calls_error); want 12 and 4"

# A head SIGKILL: the totals come back from the state database at once, and keep counting.
kill -KILL "$HEAD_PID"
sleep 0.5
start_head
wait_for 20 alive_nodes_is 1 || fail "the agent did not re-attach"
calls_are figs 12 4 || fail "after the head restart: ok $(fig figs calls_ok), error $(fig figs calls_error); want 12 and 4"
call figs add 1 || fail "the call after the head restart failed"
wait_for 15 calls_are figs 13 4 ||
    fail "after the head restart and a call: ok $(fig figs calls_ok), error $(fig figs calls_error); want 13 and 4"

# /metrics: the calls by result, and the service-time histogram holding all 17 calls.
id=$(fig figs id)
curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" >"$TMP/metrics.out" || fail "cannot read /metrics"
L="namespace=\"default\",name=\"figs\",actor_id=\"$id\""
assert_grep "$TMP/metrics.out" "^hv_actor_calls_total{$L,result=\"ok\"} 13\$" \
    "hv_actor_calls_total ok: $(grep hv_actor_calls_total "$TMP/metrics.out")"
assert_grep "$TMP/metrics.out" "^hv_actor_calls_total{$L,result=\"error\"} 4\$" "hv_actor_calls_total error"
assert_grep "$TMP/metrics.out" "^# TYPE hv_actor_calls_total counter" "hv_actor_calls_total is a counter"
assert_grep "$TMP/metrics.out" "^hv_actor_call_duration_seconds_bucket{$L,le=\"+Inf\"} 17\$" \
    "the histogram's +Inf bucket: $(grep 'hv_actor_call_duration_seconds_bucket.*Inf' "$TMP/metrics.out")"
assert_grep "$TMP/metrics.out" "^hv_actor_call_duration_seconds_count{$L} 17\$" "the histogram's count"
"$BIN/hvctl" --head "$HEAD" kill-actor figs >/dev/null || fail "kill-actor failed"
wait_for 10 actor_is figs dead || fail "figs not dead after kill-actor"
calls_are figs 13 4 || fail "a clean stop changed the totals: ok $(fig figs calls_ok), error $(fig figs calls_error)"
pass "actor call figures: ok/error split, latency, across a kill -9 restart and a head restart, in /metrics"
