#!/bin/sh
# A worker the head gave up is fenced. node-a, which runs a one-worker elastic job
# (tests/perf/bench_elastic, copies of its state at the head), is frozen with SIGSTOP (agent and
# worker: its session stays open and silent). At the lease (3 s here) the head declares it dead,
# gives the worker up and resumes the job from its copy on node-b. The old worker is in fact
# alive: speaking as it (its own worker credential), a report of its figures, a copy of the
# state and Done for its generation are all refused (PERMISSION_DENIED, "fenced"), and the
# head's copy stays the resumed generation's. Then node-a is resumed: the old worker is stopped
# (by the head's reconcile when its agent is heard again, or on its own when the head refuses
# it), and the job ends 0.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
HB_MS=500 LEASE_MS=3000
elastic_cluster 1 "node-a"
bench_job run 10
start_agent node-b 1
wait_for 30 has_copy || fail "the head has no copy of the job's state"
ghost=$(agent_workers node-a)
[ "$(echo $ghost | wc -w)" -eq 1 ] || fail "expected node-a's worker, got: $ghost"
secret=$(tr '\0' '\n' <"/proc/$ghost/environ" | sed -n 's/^HV_WORKER_SECRET=//p')
wid=$(tr '\0' '\n' <"/proc/$ghost/environ" | sed -n 's/^HV_WORKER_ID=//p')
[ -n "$secret" ] && [ -n "$wid" ] || fail "cannot read the worker's credential"
kill -STOP "$(agent_pid node-a)" "$ghost"
resumed() { grep -q "BENCH step [0-9]* gen=2 " "$TMP/run.out"; }
wait_for 30 resumed || { kill -CONT "$(agent_pid node-a)" "$ghost"; fail "the job did not resume on node-b"; }
gen=$(job_copy generation)
# Speaking as the old worker of generation 1: every call that acts for the job is refused.
raw() { "$BIN/rawcall" "$HEAD" "$@" --token "$secret" job_id=1 "worker_id=$wid" generation=1; }
raw Rendezvous/Report commits=5 >"$TMP/report.out" 2>&1
raw Rendezvous/PutState commit=999999 total=4 offset=0 data=abcd last=true \
    sha256=88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589 >"$TMP/put.out" 2>&1
raw Rendezvous/Done >"$TMP/done.out" 2>&1
kill -CONT "$ghost" # alive again, cut off from its agent still
for f in report put done; do
    cat "$TMP/$f.out"
    grep -q "code=7 .*fenced" "$TMP/$f.out" || { kill -CONT "$(agent_pid node-a)"; fail "the old worker's $f was not refused as fenced: $(cat "$TMP/$f.out")"; }
done
sleep 2 # the old worker trains on alone: its copies must not reach the head's store
kill -CONT "$(agent_pid node-a)"
wait_for 20 sh -c "! kill -0 $ghost 2>/dev/null" || fail "the old worker $ghost was not stopped"
[ "$(job_copy generation)" -ge "$gen" ] && [ "$(job_copy generation)" -ge 2 ] ||
    fail "the head's copy went back to generation $(job_copy generation) (was $gen after the resume)"
assert_grep "$TMP/head.err" "HV-RDZV-FENCED" "the head should log what it refused"
wait_submit 60
[ "$SUB_RC" -eq 0 ] || fail "the job should end 0 (rc $SUB_RC)"
pass "the frozen node's old worker was fenced (report, copy, Done refused) and stopped"
