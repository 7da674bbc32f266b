#!/bin/sh
# A saved state over 1 MiB moves with its actor (issue 17, docs/actors.md "Moves"): a `seq`
# actor (tests/tools/actor_seq.c) created with `bulk=5242880` holds 5 MiB of state, rewritten by
# a call; a drain of its node moves it: the agent uploads the saved state to the head
# (Cluster/UploadState, 1 MiB chunks) before it reports the exit, the head keeps it and the
# replacement on the other node loads it: the same bytes (their hash) and count after the move.
# A 10 MiB state is over the head's actor_state_max (8 MiB here): its move says so in the
# actor's reason and events, never silently, and the replacement starts from its constructor.
# Before large states were uploaded, the 5 MiB one was dropped (a log line) and its actor
# restarted from its constructor: the hash after the move was that of zeros.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head "actor_state_max: 8MiB"
start_agent node-a 2
start_agent node-b 2

actor_field() { # NAME FIELD: a field of `hvctl actor NAME --json`
    "$BIN/hvctl" --head "$HEAD" actor "$1" --json 2>/dev/null |
        sed -nE "s/.*\"$2\": *\"?([^\",]*)\"?,?$/\1/p" | head -n 1
}
actor_is() { [ "$(actor_field "$1" state)" = "$2" ]; }
call() { "$EX/actor_call" "@$1" "$2" "${3:-}" --timeout 15000 2>>"$TMP/call.err"; }

for a in big:5242880 huge:10485760; do
    name=${a%%:*}
    "$BIN/hvctl" --head "$HEAD" actor create --class seq --name "$name" --arg "bulk=${a#*:}" \
        -- "$BIN/actor_seq" serve >>"$TMP/create.out" 2>>"$TMP/create.err" ||
        fail "actor create $name failed: $(cat "$TMP/create.err")"
done
wait_for 20 actor_is big alive || fail "big is '$(actor_field big state)', not alive"
wait_for 20 actor_is huge alive || fail "huge is '$(actor_field huge state)', not alive"
from=$(actor_field big node)
[ "$(actor_field huge node)" = "$from" ] || fail "the two actors are on different nodes"
zeros=$(call big sum)
[ "$(call big fill 7)" = ok ] || fail "fill 7 on big failed: $(cat "$TMP/call.err")"
[ "$(call huge fill 9)" = ok ] || fail "fill 9 on huge failed: $(cat "$TMP/call.err")"
huge_before=$(call huge sum)
for n in 1 2 3; do call big seq $n >/dev/null || fail "seq $n failed"; done
before=$(call big sum)
case $before in "5242880 "*) ;; *) fail "big's sum is '$before'" ;; esac
[ "$before" != "$zeros" ] || fail "fill did not change big's state"

"$BIN/hvctl" --head "$HEAD" drain "$from" >/dev/null 2>&1 || fail "drain $from failed"
moved() { actor_is "$1" alive && [ "$(actor_field "$1" node)" != "$from" ]; }
wait_for 30 moved big || fail "big did not move off $from: $(actor_field big state): $(actor_field big reason)"
wait_for 30 moved huge || fail "huge did not move off $from: $(actor_field huge state): $(actor_field huge reason)"

# The 5 MiB state arrived whole: the same bytes and numbers, in a new process.
after=$(call big sum)
[ "$after" = "$before" ] ||
    fail "big's 5 MiB state did not survive the move: sum '$after', before '$before' (zeros: '$zeros')"
[ "$(call big get)" = "3 3 0" ] || fail "big's numbers after the move: '$(call big get)'"
[ "$(actor_field big moves)" = 1 ] || fail "big moves $(actor_field big moves), want 1"
[ "$(actor_field big restarts)" = 0 ] || fail "big's move counted as a restart"
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev.out" 2>&1
assert_grep "$TMP/ev.out" "default/big): alive (process 2) with its saved state loaded (move 1 done)"
grep -q "HV-AGENT-ACTOR-STATE.*5242[0-9]* bytes): uploaded to the head" "$TMP/agent-$from.out" \
    "$TMP/agent-$from.err" || fail "the agent of $from does not say it uploaded the state"

# The 10 MiB state is over actor_state_max: said in the events and the reason, constructor.
assert_grep "$TMP/ev.out" "default/huge): moving (move 1): its saved state was not kept: its saved state of 10485[0-9]* bytes is over the head's actor_state_max of 8388608 bytes; the replacement starts from its constructor"
huge_after=$(call huge sum)
case $huge_after in "10485760 "*) ;; *) fail "huge's sum after the move: '$huge_after'" ;; esac
[ "$huge_after" != "$huge_before" ] || fail "huge kept a state over actor_state_max"
[ "$(actor_field huge moves)" = 1 ] || fail "huge moves $(actor_field huge moves), want 1"
pass "a 5 MiB saved state moves with its actor; one over actor_state_max is said, not dropped silently"
