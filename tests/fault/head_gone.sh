#!/bin/sh
# The head dies and does not come back. An agent with the default --orphan-policy kill kills its
# workers once the lease has run out (not before); an agent with --orphan-policy keep leaves
# them running. Both agents keep trying to reconnect and stay up.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
LEASE_MS=2000
start_head
start_agent node-k 1
start_agent node-p 1 --orphan-policy keep
"$BIN/hvsubmit" --detach -np 2 "$EX/sleeper" 60 >/dev/null 2>&1 || fail "submit failed"
wait_for 15 workers_at_least 1 2 || fail "workers did not start"
kill -KILL "$HEAD_PID"
sleep 1
[ "$(n_workers 1)" -eq 2 ] || fail "workers were killed before the lease ran out"
in_k() { for p in $(workers 1); do case "$(readlink /proc/$p/cwd)" in *agent-node-k/*) return 0 ;; esac; done; return 1; }
i=0; while in_k && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
in_k && fail "node-k (orphan-policy kill) kept its worker past the lease"
[ "$(n_workers 1)" -eq 1 ] || fail "node-p (orphan-policy keep) lost its worker"
kill -0 "$(agent_pid node-k)" || fail "agent node-k exited"
kill -0 "$(agent_pid node-p)" || fail "agent node-p exited"
pass "orphan policy kill/keep after the lease"
