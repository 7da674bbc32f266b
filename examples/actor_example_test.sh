#!/usr/bin/env bash
# actor_example_test.sh: the actor examples as a user runs them (ctest hv.actor_example).
# Starts examples/actor_counter with its state file, calls it with examples/actor_call, stops it
# with SIGTERM (the agent's preemption notice), restarts it from the saved state and checks the
# count survived; then the exit statuses a script sees: a method error (1), a wrong secret (2,
# not delivered) and a method that crashes the actor (3, outcome unknown).
set -u
ulimit -c 0 # the crash case aborts the actor
EX=${HV_EXAMPLES_DIR:?HV_EXAMPLES_DIR not set (run through ctest)}
T_MULT=${HV_TEST_TIMEOUT_MULTIPLIER:-1}
TMP=$(mktemp -d /tmp/hv_actor_example.XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

export HV_ACTOR_SECRET=example-secret-0123456789
start() {
    rm -f "$TMP/addr"
    HV_ACTOR_CLASS=counter HV_ACTOR_ADDR_FILE="$TMP/addr" HV_ACTOR_STATE_OUT="$TMP/state" \
        "$@" "$EX/actor_counter" 2>>"$TMP/actor.log" &
    PID=$!
    for _ in $(seq 1 $((100 * T_MULT))); do
        [ -s "$TMP/addr" ] && ADDR=$(cat "$TMP/addr") && return 0
        sleep 0.05
    done
    fail "actor_counter did not listen: $(cat "$TMP/actor.log")"
}
call() { "$EX/actor_call" "$ADDR" "$@"; }

start env
[ "$(call add 5)" = 5 ] || fail "add 5"
[ "$(call add 37)" = 42 ] || fail "add 37"
kill -TERM "$PID"
wait "$PID" || fail "actor_counter exited with $? after SIGTERM"
PID=""
[ -s "$TMP/state" ] || fail "no state saved at SIGTERM"

start env HV_ACTOR_STATE_IN="$TMP/state"
[ "$(call get)" = 42 ] || fail "the count did not survive the restart: $(call get)"

call fail 2>"$TMP/err"; rc=$?
[ $rc = 1 ] && grep -q "this method always fails" "$TMP/err" || fail "method error: $rc $(cat "$TMP/err")"
HV_ACTOR_SECRET=another-secret-0123456789 "$EX/actor_call" "$ADDR" get 2>"$TMP/err"; rc=$?
[ $rc = 2 ] && grep -q "HV_EAUTH" "$TMP/err" || fail "wrong secret: $rc $(cat "$TMP/err")"
call crash 2>"$TMP/err"; rc=$?
[ $rc = 3 ] && grep -q "HV_EINDOUBT" "$TMP/err" || fail "crash: $rc $(cat "$TMP/err")"
wait "$PID" 2>/dev/null
PID=""
echo "PASS actor_example"
