#!/bin/sh
# Actors through the head (docs/actors.md): a named, detached counter actor is created with
# `hvctl actor create` on a 2-agent cluster (its program uploaded), called by name from another
# program (actor_call @NAME: hv_actor_lookup asks the head for the address and the per-actor
# secret), survives a head SIGKILL between two calls (re-attached, same process, same count, the
# name still resolves; the nodes' memory is shown before their agents rejoin), is restarted
# after each kill -9 of its process up to --max-restarts, then
# is dead "out of restarts", as `hvctl actors` shows. A job's worker and a Python program call it
# by name too; a wrong client token is refused. An actor owned by a job dies with the job; a
# detached one does not, and moves off a drained node with its state (not counted as a restart).
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
LEASE_MS=6000
start_metrics_head
pin_head_port
start_agents 2 node-a node-b

actor_field() { # NAME FIELD: a field of `hvctl actor NAME --json`
    "$BIN/hvctl" --head "$HEAD" actor "$1" --json 2>/dev/null |
        sed -nE "s/.*\"$2\": *\"?([^\",]*)\"?,?$/\1/p" | head -n 1
}
actor_is() { [ "$(actor_field "$1" state)" = "$2" ]; }           # NAME STATE
restarts_are() { [ "$(actor_field "$1" restarts)" = "$2" ] && actor_is "$1" alive; }
actor_pids() { pgrep -f "$TMP/agent-.*/actor_counter" 2>/dev/null; }
one_actor_proc() { [ "$(actor_pids | wc -l)" -eq 1 ]; }

call() { "$EX/actor_call" "@$1" "$2" "${3:-}" --timeout 15000 2>>"$TMP/call.err"; }

"$BIN/hvctl" --head "$HEAD" actor create --class counter --name ctr --max-restarts 2 \
    -- "$EX/actor_counter" >"$TMP/create.out" 2>"$TMP/create.err" || fail "actor create failed"
assert_grep "$TMP/create.out" "created: ctr"
wait_for 20 actor_is ctr alive || fail "actor ctr is '$(actor_field ctr state)', not alive"
[ "$(call ctr add 5)" = 5 ] || fail "first call by name did not return 5"
[ "$(call ctr add 2)" = 7 ] || fail "second call by name did not return 7"
pid1=$(actor_pids)
[ -n "$pid1" ] || fail "no actor_counter process under the agents"
# The secret is in the actor's environment only, never in a log or the store's dir as a file.
secret=$("$BIN/hvctl" --head "$HEAD" actor ctr --json | grep -c hva_ || true)
[ "$secret" -eq 0 ] || fail "hvctl actor printed the per-actor secret"
for f in "$TMP"/*.out "$TMP"/*.err; do assert_no_grep "$f" "hva_[0-9]*_[0-9a-f]\{8\}" "a secret in $f"; done

# A head SIGKILL between two calls: the actor is re-attached, its name still resolves, and the
# same process answers with the same count.
# The nodes' memory is stored with them: with both agents stopped (no rejoin yet), the restarted
# head's `hvctl nodes` shows each node's memory as before (before schema v15: none, so actors
# needing memory could not be placed until the agents joined again).
mem_before=$("$BIN/hvctl" --head "$HEAD" nodes --json | grep -o '"memory_mb": *[0-9]*' | tr -d ' ')
case $mem_before in *'"memory_mb":0'*|'') fail "a node shows no memory before the restart: $mem_before" ;; esac
kill -STOP "$(agent_pid node-a)" "$(agent_pid node-b)"
kill -KILL "$HEAD_PID"
sleep 0.5
start_head
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes_restart.out" 2>&1
mem_after=$("$BIN/hvctl" --head "$HEAD" nodes --json | grep -o '"memory_mb": *[0-9]*' | tr -d ' ')
kill -CONT "$(agent_pid node-a)" "$(agent_pid node-b)"
[ "$mem_after" = "$mem_before" ] ||
    fail "after a head SIGKILL, before the agents rejoin, the nodes' memory is '$mem_after', not '$mem_before': $(cat "$TMP/nodes_restart.out")"
grep -q "^node-a .*[0-9]MiB" "$TMP/nodes_restart.out" ||
    fail "hvctl nodes shows no MEMORY for node-a before it rejoins: $(cat "$TMP/nodes_restart.out")"
wait_for 20 alive_nodes_is 2 || fail "agents did not re-attach"
[ "$(call ctr add 1)" = 8 ] || fail "the call after the head restart did not return 8"
[ "$(actor_pids)" = "$pid1" ] || fail "the actor process was replaced across the head restart"
actor_is ctr alive || fail "ctr is not alive after the head restart"

# From a job's worker (its worker secret, the default namespace): the same name, the same actor.
"$BIN/hvsubmit" -np 1 "$EX/actor_call" @ctr add 10 >"$TMP/jobcall.out" 2>"$TMP/jobcall.err" ||
    fail "a job calling the actor by name failed"
grep -q '^\[0\]<stdout>:18$' "$TMP/jobcall.out" || fail "the job's call did not return 18: $(cat "$TMP/jobcall.out")"
# Nobody else: a client token the head did not issue is refused, and no secret is handed out.
echo hvc_not_a_token_of_this_head_0000 >"$TMP/bad.token"
HV_TOKEN_FILE=$TMP/bad.token "$EX/actor_call" @ctr get >/dev/null 2>"$TMP/badcall.err" &&
    fail "a caller with a wrong client token reached the actor"
grep -q "not authenticated" "$TMP/badcall.err" || fail "the wrong token was not refused: $(cat "$TMP/badcall.err")"
[ "$(call ctr get)" = 18 ] || fail "the refused caller changed the count"

# kill -9 of its process: restarted (from its constructor), counted, up to --max-restarts.
for n in 1 2; do
    kill -KILL $(actor_pids)
    wait_for 20 restarts_are ctr $n || fail "after kill -9 number $n: restarts $(actor_field ctr restarts), state $(actor_field ctr state)"
    [ "$(call ctr get)" = 0 ] || fail "restart $n: the new process did not start from its constructor"
done
kill -KILL $(actor_pids)
wait_for 20 actor_is ctr dead || fail "ctr is '$(actor_field ctr state)' after its third kill -9"
[ "$(actor_field ctr cause)" = "out of restarts" ] || fail "cause '$(actor_field ctr cause)', want 'out of restarts'"
"$BIN/hvctl" --head "$HEAD" actors >"$TMP/actors.out" 2>&1 || fail "hvctl actors failed"
grep -E "ctr +counter +dead +out of restarts .* 2/2" "$TMP/actors.out" >/dev/null ||
    fail "hvctl actors does not show ctr dead, out of restarts, 2/2 restarts: $(cat "$TMP/actors.out")"
# Its history: each restart with its cause, then its death, newest last (text and --json).
"$BIN/hvctl" --head "$HEAD" actor ctr >"$TMP/ctr.out" 2>&1 || fail "hvctl actor ctr failed"
sed -n '/^  history/,$p' "$TMP/ctr.out" | grep -E '^    ' | awk '{ print $3, $4, $5 }' >"$TMP/ctr.hist"
printf 'restart restarting exited\nrestart restarting exited\ndeath dead out\n' | cmp -s - "$TMP/ctr.hist" &&
    [ "$(grep -c 'killed by signal 9' "$TMP/ctr.out")" -ge 3 ] ||
    fail "hvctl actor ctr does not show 2 restarts and the death after kill -9: $(cat "$TMP/ctr.out")"
"$BIN/hvctl" --head "$HEAD" actor ctr --json | /usr/bin/python3 -c 'import json, sys
h = json.load(sys.stdin)["history"]
assert [(e["step"], e["cause"], e["restarts"]) for e in h] == [("restart", "exited", 1),
    ("restart", "exited", 2), ("death", "out of restarts", 2)], h
assert all("killed by signal 9" in e["reason"] for e in h), h' 2>"$TMP/ctrjson.err" ||
    fail "hvctl actor ctr --json history: $(cat "$TMP/ctrjson.err")"
call ctr get >/dev/null && fail "a call to a dead actor by name succeeded"
grep -q "is dead (out of restarts)" "$TMP/call.err" || fail "the caller was not told the actor is dead"

# Owned by a job: it ends with the job; a detached one stays.
"$BIN/hvsubmit" --detach -np 1 "$EX/sleeper" 120 >"$TMP/job.id" 2>"$TMP/submit.err" || fail "submit failed"
job=$(cat "$TMP/job.id")
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name owned --owner-job "$job" \
    -- "$EX/actor_counter" >/dev/null 2>>"$TMP/create.err" || fail "owned actor create failed"
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name keeper -- "$EX/actor_counter" \
    >/dev/null 2>>"$TMP/create.err" || fail "detached actor create failed"
wait_for 20 actor_is owned alive || fail "owned actor not alive"
wait_for 20 actor_is keeper alive || fail "keeper actor not alive"
"$BIN/hvctl" --head "$HEAD" cancel "$job" >/dev/null 2>&1 || fail "cancel failed"
wait_for 20 actor_is owned dead || fail "the owned actor outlived its job"
[ "$(actor_field owned cause)" = "owner ended" ] || fail "owned actor cause '$(actor_field owned cause)'"
wait_for 10 one_actor_proc || fail "the owned actor's process was not stopped"
actor_is keeper alive || fail "the detached actor ended with an unrelated job"
[ "$(call keeper add 3)" = 3 ] || fail "keeper does not answer"
# From Python (hv.actor.lookup, the same path through the head). Under the sanitizers libhv.so is
# instrumented: the uninstrumented interpreter loads it with the sanitizer runtimes preloaded (as
# python_job.sh does), leak detection off.
PRE=$(ldd "$BIN/../lib/libhv.so" 2>/dev/null | awk '/lib(a|ub)san/ { printf "%s%s", s, $3; s = " " }')
got=$(PYTHONPATH="$BIN/../python" LD_PRELOAD="$PRE" ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -c 'import hv.actor
h = hv.actor.lookup("keeper", timeout=15)
print(h.call("add", b"4", timeout=15).decode())' 2>"$TMP/py.err") || fail "Python lookup failed: $(cat "$TMP/py.err")"
[ "$got" = 7 ] || fail "Python call by name returned '$got', want 7"
# A drain of its node moves it: its replacement placed on the other node, the old process saves,
# the new one loads (the counter has save/load: its count goes with it), no restart counted.
from=$(actor_field keeper node)
"$BIN/hvctl" --head "$HEAD" drain "$from" >/dev/null 2>&1 || fail "drain $from failed"
moved() { [ "$(actor_field keeper moves)" = 1 ] && actor_is keeper alive && [ "$(actor_field keeper node)" != "$from" ]; }
wait_for 20 moved || fail "keeper did not move off drained $from: node $(actor_field keeper node), state $(actor_field keeper state)"
[ "$(actor_field keeper restarts)" = 0 ] || fail "a move counted as a restart"
[ "$(call keeper get)" = 7 ] || fail "the moved actor did not keep its count (7)"
"$BIN/hvctl" --head "$HEAD" kill-actor keeper >/dev/null || fail "kill-actor failed"
wait_for 10 actor_is keeper dead || fail "keeper not dead after kill-actor"
[ "$(actor_field keeper cause)" = killed ] || fail "keeper cause '$(actor_field keeper cause)'"
"$BIN/hvctl" --head "$HEAD" actor keeper >"$TMP/keeper.out" 2>&1 || fail "hvctl actor keeper failed"
sed -n '/^  history/,$p' "$TMP/keeper.out" | grep -E '^    ' | awk '{ print $3, $4, $5 }' >"$TMP/keeper.hist"
printf 'move moving preempted\ndeath dead killed\n' | cmp -s - "$TMP/keeper.hist" &&
    grep -qE "^    .*  move +moving +preempted +$from " "$TMP/keeper.out" ||
    fail "hvctl actor keeper does not show its move after the drain, then its death: $(cat "$TMP/keeper.out")"
# Demand no node meets: it waits, and hvctl status says so with the reason.
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name big --slots 3 -- "$EX/actor_counter" \
    >/dev/null 2>>"$TMP/create.err" || fail "big actor create failed"
sleep 1
actor_is big pending || fail "an actor needing 3 slots on 2-slot nodes is '$(actor_field big state)'"
"$BIN/hvctl" --head "$HEAD" status >"$TMP/status.out" 2>&1 || fail "hvctl status failed"
grep -q "default/big (pending): no node can ever hold it: none of the 1 nodes that take work has 3 free slots (missing: slots)" "$TMP/status.out" ||
    fail "hvctl status does not show the pending actor: $(cat "$TMP/status.out")"
# The same in --json: counted by state, and among the pending demand with its reason.
"$BIN/hvctl" --head "$HEAD" status --json >"$TMP/status.json" 2>"$TMP/status.err" ||
    fail "hvctl status --json failed"
/usr/bin/python3 - "$TMP/status.json" >"$TMP/statusjson.out" 2>&1 <<'PY' ||
import json, sys
d = json.load(open(sys.argv[1]))
assert d["actors"]["pending"] == 1, "actors by state: %r" % d.get("actors")
w = [a for a in d["pending_demand"]["actors"] if a["name"] == "big"]
assert len(w) == 1, "pending_demand.actors: %r" % d["pending_demand"].get("actors")
assert w[0]["state"] == "pending" and w[0]["slots"] == 3 and w[0]["namespace"] == "default", w
assert w[0]["reason"].startswith("no node can ever hold it: none of the 1 nodes"), w[0]["reason"]
PY
    fail "hvctl status --json does not show the pending actor with its reason: $(cat "$TMP/statusjson.out") in $(cat "$TMP/status.json")"
"$BIN/hvctl" --head "$HEAD" kill-actor big >/dev/null || fail "kill-actor big failed"
actor_is big dead || fail "big is not dead after kill-actor"
# A program the node does not have: dead, and the user is told why.
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name nope -- no-such-program-xyz \
    >/dev/null 2>>"$TMP/create.err" || fail "nope actor create failed"
wait_for 10 actor_is nope dead || fail "an actor whose program is missing is '$(actor_field nope state)'"
"$BIN/hvctl" --head "$HEAD" actor nope >"$TMP/nope.out" 2>&1
grep -q "could not run: spawn failed: node node-[ab] has no 'no-such-program-xyz' on PATH" "$TMP/nope.out" ||
    fail "hvctl actor does not say why the program could not run: $(cat "$TMP/nope.out")"
# The metric: every actor of this test is dead by now.
curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" >"$TMP/metrics.out" || fail "cannot read /metrics"
grep -q '^hv_actors{state="dead"} 5$' "$TMP/metrics.out" ||
    fail "hv_actors: $(grep hv_actors "$TMP/metrics.out")"
grep -q '^hv_actors{state="alive"} 0$' "$TMP/metrics.out" || fail "hv_actors alive is not 0"
pass "actor by name through the head: calls, head restart, kill -9 restarts up to max, owner death"
