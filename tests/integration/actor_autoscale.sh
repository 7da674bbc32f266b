#!/bin/sh
# Actors placed by node labels and memory, and bought for by the autoscaler (docs/actors.md,
# issue 17 §1): on the simulated cloud, the cluster's one node (type small: zone=a, 512 MiB)
# takes a small actor that asks for zone=a and 256 MiB; an actor that needs disk=ssd and
# 2048 MiB fits no node: `hvctl actor create` and `hvctl status` say no node can ever hold it and
# that the autoscaler is buying one, a node of type big (zone=a,disk=ssd, 4096 MiB) joins with
# those labels and that memory (`hvctl nodes`), the actor is placed there and answers a call;
# an actor no type can hold (100,000 MiB) stays pending and `hvctl status` says why no node can
# be bought. Labels and memory survive in `hvctl actor --json`. A `moving` actor is demand too:
# an actor with a label only big nodes have, its node drained, is listed by `hvctl status` as
# moving with its reason, the autoscaler buys a big node, and the actor moves there with its
# state (issue 17: before, a moving actor was neither in the status's demand nor bought for).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head "autoscaler:" "  provider: spot-sim" "  min_nodes: 1" "  max_nodes: 3" \
    "  idle_timeout_s: 60" "  launch_timeout_s: 30" "  node_types:" \
    "    small: {slots: 2, memory_mb: 512, labels: {zone: a}, price_per_hour: 0.1}" \
    "    big: {slots: 2, memory_mb: 4096, labels: {zone: a, disk: ssd}, price_per_hour: 0.5}" \
    "  fallback: [small, big]" \
    "  spot_sim:" "    boot_min_ms: 2500" "    boot_max_ms: 3000"

actor_field() { # NAME FIELD: a field of `hvctl actor NAME --json`
    "$BIN/hvctl" --head "$HEAD" actor "$1" --json 2>/dev/null |
        sed -nE "s/.*\"$2\": *\"?([^\",]*)\"?,?$/\1/p" | head -n 1
}
actor_is() { [ "$(actor_field "$1" state)" = "$2" ]; }
status_has() { "$BIN/hvctl" --head "$HEAD" status >"$TMP/status.out" 2>&1 && grep -q -- "$1" "$TMP/status.out"; }
call() { "$EX/actor_call" "@$1" "$2" "${3:-}" --timeout 15000 2>>"$TMP/call.err"; }

wait_for 30 alive_nodes_is 1 || fail "the autoscaler did not bring up the cluster's minimum node"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes1.out" 2>&1
grep -q "^small-1 .* 512MiB .*zone=a" "$TMP/nodes1.out" ||
    fail "hvctl nodes does not show small-1 with 512 MiB and zone=a: $(cat "$TMP/nodes1.out")"

# Fits the small node (its label, half its memory): placed at once.
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name little --label zone=a \
    --memory-mb 256 -- "$EX/actor_counter" >"$TMP/little.out" 2>"$TMP/create.err" ||
    fail "actor create little failed: $(cat "$TMP/create.err")"
wait_for 20 actor_is little alive || fail "little is '$(actor_field little state)', not alive"
[ "$(actor_field little node)" = small-1 ] || fail "little is on '$(actor_field little node)'"

# Needs a label and memory no node has: pending, "no node can ever hold it", and a node bought.
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name ssd --label disk=ssd \
    --memory-mb 2048 -- "$EX/actor_counter" >"$TMP/ssd.out" 2>>"$TMP/create.err" ||
    fail "actor create ssd failed: $(cat "$TMP/create.err")"
assert_grep "$TMP/ssd.out" "no node can ever hold it: none of the 1 nodes that take work has 1 free slot, 2048 MiB of free memory, labels disk=ssd"
# (a bought node boots for 2.5 to 3 s on this simulated cloud: the window to see it)
wait_for 10 status_has "default/ssd (pending): no node can ever hold it.*the autoscaler is buying a node for it: instance 2 (type big) is launching" ||
    fail "hvctl status does not say a node is being bought for ssd: $(cat "$TMP/status.out")"
wait_for 30 actor_is ssd alive || fail "ssd is '$(actor_field ssd state)', not alive: $(actor_field ssd reason)"
[ "$(actor_field ssd node)" = big-2 ] || fail "ssd is on '$(actor_field ssd node)', not big-2"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes2.out" 2>&1
grep -q "^big-2 .* 4096MiB .*disk=ssd" "$TMP/nodes2.out" ||
    fail "the bought node does not show its memory and labels: $(cat "$TMP/nodes2.out")"
[ "$(call ssd add 5)" = 5 ] || fail "a call to the actor on the bought node did not return 5"
[ "$(actor_field ssd memory_mb)" = 2048 ] || fail "memory_mb '$(actor_field ssd memory_mb)'"
[ "$(actor_field ssd labels)" = disk=ssd ] || fail "labels '$(actor_field ssd labels)'"
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev.out" 2>&1
assert_grep "$TMP/ev.out" "autoscaler.launch .*actor [0-9]* ssd wants 1 more workers than the cluster can take: a big node holds 2; skipped small lacks its labels"

# No type can hold it: it waits, and the user is told why no node is bought.
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name huge --memory-mb 100000 \
    -- "$EX/actor_counter" >"$TMP/huge.out" 2>>"$TMP/create.err" || fail "actor create huge failed"
wait_for 10 status_has "default/huge (pending): no node can ever hold it.*the autoscaler cannot buy a node for it: actor [0-9]* huge wants 1 more workers .* no type can launch: small too small, big too small" ||
    fail "hvctl status does not say why no node is bought for huge: $(cat "$TMP/status.out")"
actor_is huge pending || fail "huge is '$(actor_field huge state)'"
alive_nodes_is 2 || fail "a node was bought for a demand no type meets"
# A moving actor is demand: "mover" fits only a big node (disk=ssd); its node is drained, no
# other node carries the label, so the autoscaler buys a big node and it moves there with its
# state. (ssd moves with it: the new big node holds both.)
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name mover --label disk=ssd \
    --memory-mb 1024 -- "$EX/actor_counter" >"$TMP/mover.out" 2>>"$TMP/create.err" ||
    fail "actor create mover failed: $(cat "$TMP/create.err")"
wait_for 20 actor_is mover alive || fail "mover is '$(actor_field mover state)', not alive"
[ "$(actor_field mover node)" = big-2 ] || fail "mover is on '$(actor_field mover node)'"
[ "$(call mover add 7)" = 7 ] || fail "a call to mover did not return 7"
"$BIN/hvctl" --head "$HEAD" drain big-2 >"$TMP/drain.out" 2>&1 ||
    fail "hvctl drain big-2 failed: $(cat "$TMP/drain.out")"
wait_for 10 status_has "default/mover (moving): no node can ever hold it: none of the 1 nodes that take work has 1 free slot, 1024 MiB of free memory, labels disk=ssd.*the autoscaler is buying a node for it: instance 3 (type big) is launching" ||
    fail "hvctl status does not list the moving actor among the demand with a node being bought: $(cat "$TMP/status.out")"
"$BIN/hvctl" --head "$HEAD" status --json >"$TMP/status.json" 2>&1
grep -q '"state": *"moving"' "$TMP/status.json" ||
    fail "hvctl status --json lists no moving actor in pending_demand: $(cat "$TMP/status.json")"
wait_for 40 actor_is mover alive || fail "mover is '$(actor_field mover state)', not alive: $(actor_field mover reason)"
[ "$(actor_field mover node)" = big-3 ] || fail "mover moved to '$(actor_field mover node)', not big-3"
[ "$(actor_field mover moves)" = 1 ] || fail "mover moves '$(actor_field mover moves)', not 1"
[ "$(call mover get)" = 7 ] || fail "mover lost its state in the move: get says '$(call mover get)'"
"$BIN/hvctl" --head "$HEAD" events --limit 1000 >"$TMP/ev2.out" 2>&1
assert_grep "$TMP/ev2.out" "autoscaler.launch .*instance 3 (big.*actor [0-9]* \(ssd\|mover\) wants 1 more workers"
pass "actors are placed by labels and memory; the autoscaler buys a node of the type an actor needs, also for a moving one, and says so"
