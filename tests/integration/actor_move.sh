#!/bin/sh
# A stateful actor moved with its state (issue 17 §2, docs/actors.md "Moves"): a "seq" actor
# (tests/tools/actor_seq.c: it counts numbered calls and how many did not follow the previous
# one) is called by name by a caller that sends numbered calls continuously, 4 in flight. A drain
# of its node (hvctl drain) moves it: the replacement is placed on the other node before the old
# process stops, the old one answers what it ran and saves, the state reaches the new node
# through the head, and the caller's handle re-resolves and sends the calls that did not run
# again, in order. The caller sees no error; the actor ends with every number once, in order
# (count = last = N, none out of order), in a new process on the other node; moves 1, restarts 0.
# Then the same with a preemption notice (SIGTERM to the node's agent, which then leaves), and
# a kill -9 under a caller of an actor with --max-call-retries: the calls in doubt are resent.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2 --drain-deadline 30
start_agent node-b 2 --drain-deadline 30

actor_field() { # NAME FIELD: a field of `hvctl actor NAME --json`
    "$BIN/hvctl" --head "$HEAD" actor "$1" --json 2>/dev/null |
        sed -nE "s/.*\"$2\": *\"?([^\",]*)\"?,?$/\1/p" | head -n 1
}
actor_is() { [ "$(actor_field "$1" state)" = "$2" ]; }
progress_at_least() { [ "$(cat "$TMP/progress" 2>/dev/null || echo 0)" -ge "$1" ]; }
get() { "$EX/actor_call" "@seq" "$1" --timeout 15000 2>>"$TMP/call.err"; }
gone() { ! kill -0 "$1" 2>/dev/null; }
# calls_start K FIRST LAST: caller K sends seq the calls FIRST..LAST (4 in flight, its progress in
# $TMP/progress) in the background, its pid in CALLER; waits until 200 were answered.
calls_start() {
    rm -f "$TMP/progress"
    "$BIN/actor_seq" call seq "$2" "$3" "$TMP/progress" 4 >"$TMP/caller$1.out" 2>"$TMP/caller$1.err" &
    CALLER=$!
    wait_for 20 progress_at_least 200 || fail "caller $1 did not get going: $(cat "$TMP/caller$1.err")"
}
# calls_moved K N FROM MOVES WHAT: caller K ends within 45 s of WHAT (the drain, the notice)
# without an error, its N calls answered in order; seq is alive off node FROM within 10 s, moved
# MOVES times in all.
moved_off() { actor_is seq alive && [ "$(actor_field seq node)" != "$FROM" ]; }
calls_moved() {
    wait_for 45 gone "$CALLER" || fail "caller $1 did not finish within 45 s of the $5"
    wait "$CALLER" || fail "caller $1 saw an error during the $5's move: $(cat "$TMP/caller$1.err")"
    grep -q "^ok $2 " "$TMP/caller$1.out" || fail "caller $1: $(cat "$TMP/caller$1.out")"
    FROM=$3
    wait_for 10 moved_off || fail "seq did not move off $3 ($5): $(actor_field seq state) on $(actor_field seq node)"
    [ "$(actor_field seq moves)" = "$4" ] || fail "moves $(actor_field seq moves), want $4"
}

"$BIN/hvctl" --head "$HEAD" actor create --class seq --name seq -- "$BIN/actor_seq" serve \
    >"$TMP/create.out" 2>"$TMP/create.err" || fail "actor create failed: $(cat "$TMP/create.err")"
wait_for 20 actor_is seq alive || fail "seq is '$(actor_field seq state)', not alive"
pid1=$(get pid)
from=$(actor_field seq node)

# 1. hvctl drain, calls flowing.
calls_start 1 1 1200
"$BIN/hvctl" --head "$HEAD" drain "$from" >/dev/null 2>&1 || fail "drain $from failed"
calls_moved 1 1200 "$from" 1 drain
[ "$(actor_field seq restarts)" = 0 ] || fail "a move counted as a restart"
st=$(get get)
[ "$st" = "1200 1200 0" ] || fail "after the drain the actor's state is '$st', want '1200 1200 0' (count, last, out of order)"
pid2=$(get pid)
[ -n "$pid2" ] && [ "$pid2" != "$pid1" ] || fail "the actor answers from the same process ($pid1) after the move"
grep -q "saved state loaded" "$TMP/head.err" "$TMP/head.out" 2>/dev/null ||
    "$BIN/hvctl" --head "$HEAD" events 2>/dev/null | grep -q "saved state loaded" ||
    fail "no event says the replacement loaded the saved state"
echo "drain: $(cat "$TMP/caller1.out")"

# 2. A preemption notice: SIGTERM to the agent of the actor's node (--drain-deadline 30).
"$BIN/hvctl" --head "$HEAD" undrain "$from" >/dev/null 2>&1 || fail "undrain $from failed"
at=$(actor_field seq node)
calls_start 2 1201 2000
kill -TERM "$(agent_pid "$at")"
calls_moved 2 800 "$at" 2 notice
st=$(get get)
[ "$st" = "2000 2000 0" ] || fail "after the notice the actor's state is '$st', want '2000 2000 0'"
wait_for 40 gone "$(agent_pid "$at")" || fail "the noticed agent did not leave once its actor moved"
echo "notice: $(cat "$TMP/caller2.out")"

# 3. Retries: an actor created with --max-call-retries 3 is killed (-9) under the same caller:
# the calls in doubt are sent again to its restarted process (from its constructor: it has no
# saved state), and the caller sees no error, only calls sent more than once.
"$BIN/hvctl" --head "$HEAD" actor create --class seq --name retry --max-restarts 1 \
    --max-call-retries 3 -- "$BIN/actor_seq" serve >/dev/null 2>>"$TMP/create.err" ||
    fail "retry actor create failed"
wait_for 20 actor_is retry alive || fail "retry is '$(actor_field retry state)', not alive"
rpid=$("$EX/actor_call" "@retry" pid --timeout 15000 2>>"$TMP/call.err")
rm -f "$TMP/progress"
"$BIN/actor_seq" call retry 1 600 "$TMP/progress" 4 >"$TMP/caller3.out" 2>"$TMP/caller3.err" &
caller=$!
wait_for 20 progress_at_least 100 || fail "the third caller did not get going: $(cat "$TMP/caller3.err")"
# Stopped first, so that calls are surely in flight, sent and unanswered, when it dies: those
# are the calls in doubt that the retries must send again (a kill between two calls leaves none).
kill -STOP "$rpid"
sleep 0.5
kill -KILL "$rpid"
wait_for 45 gone "$caller" || fail "the caller did not finish within 45 s of the kill"
wait "$caller" || fail "with retries the caller saw an error after kill -9: $(cat "$TMP/caller3.err")"
grep -qE "^ok 600 resent [1-9]" "$TMP/caller3.out" || fail "no call was sent again: $(cat "$TMP/caller3.out")"
[ "$(actor_field retry restarts)" = 1 ] || fail "retry restarts $(actor_field retry restarts), want 1"
echo "retries: $(cat "$TMP/caller3.out")"
pass "an actor moved with its state on a drain and on a notice: no call lost or reordered; retries"
