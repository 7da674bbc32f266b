#!/bin/sh
# Issue 26 §3, the fleet's throughput table stored (schema v21, job_tput): what a job's workers
# measured at each world size (their reports; HV_FIGURES_REPORT_MS=500 here, 10 s by default) is
# stored before the policy decides with it, so a head SIGKILL loses none of it. An elastic job A
# runs at 2 workers; `hvctl queue --json` shows its throughput at size 2; the head is SIGKILLed
# and restarted while A runs: the restarted head shows the same size with at least the steps and
# seconds the old one showed, before A's workers report again (the agent is stopped with SIGSTOP
# for the restart, so that no new report can fill the table in). A ends 0, every epoch exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=15000 # the agent keeps its workers while the head restarts (its agent is stopped)
start_elastic_head "fleet:" "  resize_interval_ms: 1000"
pin_head_port
HV_FIGURES_REPORT_MS=500 start_agent node-a 2
# tput_of JOB SIZE: "STEPS_PER_S SECONDS" of JOB at SIZE in `hvctl queue --json` (nothing when
# none is shown).
tput_of() {
    "$BIN/hvctl" --head "$HEAD" queue --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
q = json.load(sys.stdin)
for j in q["jobs"]:
    for t in j.get("throughput", []) if j["job_id"] == int(sys.argv[1]) else []:
        if t["size"] == int(sys.argv[2]) and t["seconds"] > 0:
            print(t["steps_per_s"], t["seconds"])' "$1" "$2"
}
has_tput() { [ -n "$(tput_of "$1" "$2")" ]; }
# Measured for at least 2 s (the model uses a size once it was observed for 0.5 s).
tput_past() { tput_of "$1" "$2" | awk -v s="$3" '$2 >= s { ok = 1 } END { exit !ok }'; }
submit a -np 2 --min-np 1 --max-np 2 -- --epochs 4 --step-delay-ms 40
A_PID=$SUB_PID
wait_for 60 tput_past 1 2 2 || fail "job A's throughput at 2 workers is not shown"
# Stop the agent and its workers (no report reaches the new head before it is read), note what
# the head shows, and kill it.
AGENT=$(agent_pid node-a)
WORKERS=$(agent_workers node-a)
# shellcheck disable=SC2086 # pids: one word each
kill -STOP "$AGENT" $WORKERS
sleep 0.5 # a report already sent reaches the head
BEFORE=$(tput_of 1 2)
[ -n "$BEFORE" ] || fail "no throughput shown before the kill"
restart_head
AFTER=$(tput_of 1 2)
# shellcheck disable=SC2086
kill -CONT "$AGENT" $WORKERS
echo "before the kill: $BEFORE; after the restart: $AFTER"
[ -n "$AFTER" ] || fail "the restarted head lost job A's throughput table"
[ "$AFTER" = "$BEFORE" ] || fail "the restarted head shows another throughput ($AFTER, was $BEFORE)"
SUB_PID=$A_PID
ran_exact a 4 120 "job A should go on after the head restart and succeed"
pass "the fleet's throughput table survives a head SIGKILL"
