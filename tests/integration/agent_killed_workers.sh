#!/bin/sh
# Workers die with their agent. An hvagent killed with SIGKILL (or lost with its machine's
# process) cannot stop its workers; before, a C worker of an elastic job and a Python worker
# that imported hv trained on alone for as long as their program ran, unseen, holding their cores,
# though the head had counted them lost. libhv ties every process the agent started to it
# (HV_AGENT_PID, PR_SET_PDEATHSIG): they are gone within a second or two of the agent's SIGKILL,
# on the node whose agent died, while the other node's workers carry on (here with the head
# SIGKILLed first, as when the head's machine and an agent's go together).
. "$HV_SRC_DIR/tests/lib.sh"
PY=/usr/bin/python3
hv_setup
LEASE_MS=2000
start_head
start_agent node-a 1
start_agent node-b 1

# A C elastic job on node-a and node-b (libhv.a: tied at hv_init).
"$BIN/hvsubmit" -np 2 --min-np 1 --max-np 2 "$EX/elastic_train" \
    --epochs 500 --train-limit 2000 --step-delay-ms 20 >"$TMP/c.out" 2>"$TMP/c.err" &
SUBC=$!
wait_for 30 workers_at_least 1 2 || fail "the C job's 2 workers did not start"
# A Python worker that imported hv (libhv.so: tied when it is loaded) on node-c, the one free slot.
start_agent node-c 1
if $PY -c 'import sys' 2>/dev/null; then
    cat >"$TMP/idle.py" <<'PY'
import time
import hv
print("loaded", hv.library_path, flush=True)
time.sleep(300)
PY
    "$BIN/hvsubmit" -np 1 -- $PY "$TMP/idle.py" >"$TMP/py.out" 2>"$TMP/py.err" &
    SUBP=$!
    wait_for 30 lines_at_least "$TMP/py.out" "loaded" 1 || fail "the Python worker did not load hv"
fi

on_node() { # NODE: pids of the workers that node-NODE's agent started
    for p in $(workers); do
        case "$(readlink /proc/$p/cwd)" in "$TMP/agent-$1/"*) echo "$p" ;; esac
    done
}
vic=$(on_node node-b)
[ -n "$vic" ] || fail "no worker found on node-b"
# The head goes first, so that nobody else can tell the worker to stop (with the head up, its
# suspicion of the closed session stops an elastic job's stale workers anyway).
kill -KILL "$HEAD_PID"; wait "$HEAD_PID" 2>/dev/null
kill -KILL "$(agent_pid node-b)"
wait_for 5 sh -c "! kill -0 $vic 2>/dev/null" || fail "node-b's worker $vic outlived its agent's SIGKILL"
[ -n "$(on_node node-a)" ] || fail "node-a's worker must carry on"

if [ -n "${SUBP:-}" ]; then
    pyw=$(on_node node-c)
    [ -n "$pyw" ] || fail "no Python worker found on node-c"
    kill -KILL "$(agent_pid node-c)"
    wait_for 5 sh -c "! kill -0 $pyw 2>/dev/null" || fail "node-c's Python worker $pyw outlived its agent's SIGKILL"
fi
kill -KILL $SUBC ${SUBP:-} 2>/dev/null
pass "a SIGKILLed agent's workers (C and Python) die with it; the other node's carry on"
