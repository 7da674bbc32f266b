#!/bin/sh
# Issue 26 §3, goodput through the real binaries: workers report their step throughput with their
# figures (HV_FIGURES_REPORT_MS=500 here, 10 s by default), the head fits each job's throughput
# per size and gives a free slot to the job whose throughput rises most with it. One agent of 4
# slots; two elastic jobs of -np 2 --min-np 1 --max-np 3: S, whose step is compute split among its
# workers (--compute-ms-per-sample), and F, whose step is a fixed sleep (--step-delay-ms) that
# more workers do not shorten. Both run at 2 (measured there), a fixed job X of 2 shrinks both to
# 1 (measured there), and when X ends its 2 slots both go to S (to 3) while F stays at 1. With
# the default shape (no measurement) the slots would be split, one each: the assertion fails
# without the measured model.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
start_elastic_head "fleet:" "  resize_interval_ms: 1000"
HV_FIGURES_REPORT_MS=500 start_agent node-a 4
queue() { "$BIN/hvctl" --head "$HEAD" queue --json >"$TMP/queue.json" 2>&1; }
# size_is JOB N: the job runs with N workers (hvctl queue --json).
size_is() {
    queue && /usr/bin/python3 - "$TMP/queue.json" "$1" "$2" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))
jobs = q["jobs"] if isinstance(q, dict) else q
j = [j for j in jobs if j["job_id"] == int(sys.argv[2])]
sys.exit(0 if j and j[0]["size"] == int(sys.argv[3]) else 1)
PY
}
submit s -np 2 --min-np 1 --max-np 3 -- --epochs 100 --compute-ms-per-sample 2
S_PID=$SUB_PID
# S is job 1, F job 2: F is submitted as soon as the head holds S, so that both are admitted at
# 2 on the 4 slots before S's resize interval (1 s) lets it grow onto free ones (once S ran at 2
# first, a loaded CI run saw it grow to 3 before F came, and F could only run at 1).
job_known() { "$BIN/hvctl" --head "$HEAD" job "$1" >/dev/null 2>&1; }
wait_for 30 job_known 1 || fail "job S was not submitted"
submit f -np 2 --min-np 1 --max-np 3 -- --epochs 100 --step-delay-ms 150
F_PID=$SUB_PID
wait_for 30 size_is 1 2 || { cat "$TMP/queue.json"; fail "job S did not run with 2 workers"; }
wait_for 30 size_is 2 2 || { cat "$TMP/queue.json"; fail "job F did not run with 2 workers"; }
sleep 3 # both measured at 2 (reports every 0.5 s)
submit x -np 2 -- --epochs 1 --step-delay-ms 120
X_PID=$SUB_PID
wait_for 30 size_is 1 1 || { cat "$TMP/queue.json"; fail "job S was not shrunk to 1 for job X"; }
wait_for 30 size_is 2 1 || { cat "$TMP/queue.json"; fail "job F was not shrunk to 1 for job X"; }
SUB_PID=$X_PID; wait_submit 60
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/x.err" >&2; fail "job X should succeed, hvsubmit exited $SUB_RC"; }
# X's 2 slots: S's throughput rises with them, F's does not.
wait_for 20 size_is 1 3 || { cat "$TMP/queue.json"; fail "job S should have grown to 3 on X's slots"; }
sleep 2
size_is 2 1 || { cat "$TMP/queue.json"; fail "job F should have stayed at 1: a worker adds nothing to it"; }
"$BIN/hvctl" --head "$HEAD" cancel 1 >/dev/null 2>&1
"$BIN/hvctl" --head "$HEAD" cancel 2 >/dev/null 2>&1
events 1
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "job S's growth should be a fleet.grow event to 3"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
gr = [e for e in evs if e["kind"] == "fleet.grow"]
assert gr and gr[-1]["data"]["to"] == 3 and gr[-1]["data"]["reason"] == "grown", gr
PY
pass "the slots freed went to the job whose throughput rises with them (S to 3, F kept 1)"
