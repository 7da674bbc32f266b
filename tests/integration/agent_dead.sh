#!/bin/sh
# An agent killed with SIGKILL is declared dead after the lease (not before), and its job fails
# with that reason; hvsubmit exits non-zero naming the node.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
LEASE_MS=2000
start_head
start_agents 2 node-a node-b
submit_sleepers 4 60
t0=$(date +%s%N)
kill -KILL "$(agent_pid node-b)"
for p in $(workers); do case "$(readlink /proc/$p/cwd)" in *agent-node-b/*) kill -KILL $p ;; esac; done # the node's machine is gone with it
wait $SUB; ec=$?
t1=$(date +%s%N)
[ $ec -ne 0 ] || fail "hvsubmit exited 0 though a node died"
ms=$(( (t1 - t0) / 1000000 ))
[ $ms -ge 1500 ] || fail "the node was declared dead after ${ms} ms, before its 2000 ms lease"
[ $ms -le 15000 ] || fail "the job took ${ms} ms to fail"
assert_grep "$TMP/submit.err" "node-b" "hvsubmit must name the dead node"
assert_grep "$TMP/submit.err" "no heartbeat" "hvsubmit must give the reason"
[ "$(job_state 1)" = failed ] || fail "job not failed"
"$BIN/hvctl" --head "$HEAD" --json nodes >"$TMP/nodes.json"
grep -q '"name": *"node-b"' "$TMP/nodes.json" || fail "node-b missing from nodes"
sed -n '/"node-b"/,/}/p' "$TMP/nodes.json" | grep -q '"state": *"dead"' || fail "node-b not listed as dead"
wait_for 10 no_workers || fail "node-a's workers were not killed"
pass "dead agent detected after ${ms} ms (lease 2000 ms); job failed with the reason"
