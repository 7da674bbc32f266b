#!/bin/sh
# Workers die with their agent. An hvagent killed with SIGKILL (or lost with its machine's
# process) cannot stop its workers; before, a C worker of an elastic job and a Python worker
# that imported hv trained on alone for as long as their program ran, unseen, holding their cores,
# though the head had counted them lost. libhv ties every process the agent started to it
# (HV_AGENT_PID, PR_SET_PDEATHSIG): they are gone within a second or two of the agent's SIGKILL,
# on the node whose agent died, while another node's worker carries on (here with the head
# SIGKILLed first, as when the head's machine and an agent's go together).
. "$HV_SRC_DIR/tests/lib.sh"
PY=/usr/bin/python3
hv_setup
# A long lease: node-c's agent must not stop its worker for want of the (killed) head
# before the test is done with it (--orphan-policy kill acts once the lease runs out).
LEASE_MS=30000
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
    # Under the sanitizers libhv.so is instrumented: the interpreter loads it with the sanitizer
    # runtimes preloaded (as python_job.sh does), leak detection off.
    PRE=$(ldd "$BIN/../lib/libhv.so" 2>/dev/null | awk '/lib(a|ub)san/ { printf "%s%s", s, $3; s = " " }')
    if [ -n "$PRE" ]; then
        set -- --env "LD_PRELOAD=$PRE" --env "ASAN_OPTIONS=detect_leaks=0"
    else
        set --
    fi
    "$BIN/hvsubmit" -np 1 "$@" -- $PY "$TMP/idle.py" >"$TMP/py.out" 2>"$TMP/py.err" &
    SUBP=$!
    wait_for 30 lines_at_least "$TMP/py.out" "loaded" 1 \
        || fail "the Python worker did not load hv: $(tail -3 "$TMP/py.err")"
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

if [ -n "${SUBP:-}" ]; then
    # Its agent lives: it must still run (node-a's C worker may have ended on its own, its peer
    # gone and no head to re-join).
    pyw=$(on_node node-c)
    [ -n "$pyw" ] || fail "no Python worker found on node-c: it must carry on while its agent lives"
    kill -KILL "$(agent_pid node-c)"
    wait_for 5 sh -c "! kill -0 $pyw 2>/dev/null" || fail "node-c's Python worker $pyw outlived its agent's SIGKILL"
fi
kill -KILL $SUBC ${SUBP:-} 2>/dev/null
pass "a SIGKILLed agent's workers (C and Python) die with it; another node's carries on"
