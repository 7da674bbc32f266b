#!/bin/sh
# Blacklisting by node identity, with cooldowns. Workers on node-a fail at their first step in
# every generation (elastic_train --exit-on-node): node-a is barred for a 1 s cooldown, the job
# grows back onto it when the cooldown ends, fails there again, and after 2 strikes
# (blacklist_max_strikes) node-a is barred for good; `hvctl nodes` shows it. A new agent under
# the same name (a new machine reusing the host name) starts clean: the job grows onto it again.
# The job itself ends 0 on node-b with every epoch exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
COOLDOWN_S=1 COOLDOWN_MAX_S=2 MAX_STRIKES=2 start_elastic_head
start_agent node-a 2
start_agent node-b 2
submit flap -np 4 --min-np 1 --max-np 4 --max-resets 50 -- --epochs 6 --step-delay-ms 30 \
    --exit-on-node node-a:3
wait_for 90 sh -c "'$BIN/hvctl' --head '$HEAD' nodes | grep -q 'node-a.*job 1: permanent (2 strikes)'" \
    || { "$BIN/hvctl" --head "$HEAD" nodes >&2; fail "node-a should end up barred for good"; }
events 1
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "expected two strikes, the second for good, and a regrowth after the cooldown"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
bl = [e["data"] for e in ev if e["kind"] == "node.blacklist"]
assert len(bl) >= 2, bl
assert bl[0]["strikes"] == 1 and not bl[0]["permanent"], bl[0]
assert bl[1]["strikes"] == 2 and bl[1]["permanent"], bl[1]
assert any(e["kind"] == "node.cooldown" for e in ev), "no cooldown-ended event"
grow = [e for e in ev if e["kind"] == "job.grow"]
assert any("cooldown of node node-a ended" in e["message"] for e in grow), [e["message"] for e in grow]
PY
# The same name, a new agent process: not the node that failed.
kill -INT "$(agent_pid node-a)"
wait_for 20 sh -c "! kill -0 $(agent_pid node-a) 2>/dev/null" || fail "node-a's agent did not stop"
start_agent node-a 2
wait_for 60 sh -c "[ \$('$BIN/hvctl' --head '$HEAD' events --job 1 | grep -c 'node node-a is barred from job 1 for .* after failure 1 ') -ge 2 ]" \
    || fail "a new agent named node-a should start clean (and fail once more here)"
ran_exact flap 6 180 "the job should finish on node-b"
pass "cooldown, regrowth, permanent bar after 2 strikes, a reused name starts clean"
