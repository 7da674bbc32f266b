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

"$BIN/hvctl" --head "$HEAD" actor create --class seq --name seq -- "$BIN/actor_seq" serve \
    >"$TMP/create.out" 2>"$TMP/create.err" || fail "actor create failed: $(cat "$TMP/create.err")"
wait_for 20 actor_is seq alive || fail "seq is '$(actor_field seq state)', not alive"
pid1=$(get pid)
from=$(actor_field seq node)

# 1. hvctl drain, calls flowing.
"$BIN/actor_seq" call seq 1 1200 "$TMP/progress" 4 >"$TMP/caller1.out" 2>"$TMP/caller1.err" &
caller=$!
wait_for 20 progress_at_least 200 || fail "the caller did not get going: $(cat "$TMP/caller1.err")"
"$BIN/hvctl" --head "$HEAD" drain "$from" >/dev/null 2>&1 || fail "drain $from failed"
wait_for 45 gone "$caller" || fail "the caller did not finish within 45 s of the drain"
wait "$caller" || fail "the caller saw an error during the move: $(cat "$TMP/caller1.err")"
grep -q "^ok 1200 " "$TMP/caller1.out" || fail "caller: $(cat "$TMP/caller1.out")"
moved() { actor_is seq alive && [ "$(actor_field seq node)" != "$from" ]; }
wait_for 10 moved || fail "seq did not move off $from: $(actor_field seq state) on $(actor_field seq node)"
[ "$(actor_field seq moves)" = 1 ] || fail "moves $(actor_field seq moves), want 1"
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
rm -f "$TMP/progress"
"$BIN/actor_seq" call seq 1201 2000 "$TMP/progress" 4 >"$TMP/caller2.out" 2>"$TMP/caller2.err" &
caller=$!
wait_for 20 progress_at_least 200 || fail "the second caller did not get going: $(cat "$TMP/caller2.err")"
kill -TERM "$(agent_pid "$at")"
wait_for 45 gone "$caller" || fail "the caller did not finish within 45 s of the notice"
wait "$caller" || fail "the caller saw an error during the notice's move: $(cat "$TMP/caller2.err")"
grep -q "^ok 800 " "$TMP/caller2.out" || fail "caller: $(cat "$TMP/caller2.out")"
moved2() { actor_is seq alive && [ "$(actor_field seq node)" != "$at" ]; }
wait_for 10 moved2 || fail "seq did not move off noticed $at: $(actor_field seq state) on $(actor_field seq node)"
[ "$(actor_field seq moves)" = 2 ] || fail "moves $(actor_field seq moves), want 2"
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
