#!/bin/sh
# A lone member's loss resumes at once. A one-worker elastic job (tests/perf/bench_elastic, a
# copy of its state at the head) runs on node-a; node-a's agent and worker are SIGKILLed
# together. Its agent's session closes at once: node-a is suspected, and with the job's last
# holder of the state on it and past the grace (500 ms), the head gives the worker up instead of
# waiting for the lease (10 s, the default) and resumes the job from its copy on node-b: the
# first step of the next generation comes about a second after the kill (limit here 4 s, with
# room for a loaded machine; 10.6 s when the resume waited for the lease). The events say why,
# and the job ends 0.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
HB_MS=1000 LEASE_MS=10000
elastic_cluster 1 "node-a"
bench_job run 8
start_agent node-b 1 # where the job resumes (it cannot run there before: one worker, on node-a)
wait_for 30 has_copy || fail "the head has no copy of the job's state"
kill_node node-a 2
first_step() {
    sed -n 's/.*BENCH step \([0-9]*\) gen=\([0-9]*\) .*/\1 \2/p' "$TMP/run.out" |
        awk -v t="$T_KILL" '$1 >= t && $2 > 1 { print $1; exit }'
}
stepped() { [ -n "$(first_step)" ]; }
wait_for 30 stepped || fail "the job did not step again within $((30 * T_MULT)) s of the kill"
after=$(($(first_step) - T_KILL))
wait_submit 60
[ "$SUB_RC" -eq 0 ] || fail "the job should end 0 after its resume (rc $SUB_RC)"
events 1
/usr/bin/python3 - "$TMP/events-1.json" "$T_KILL" <<'PY' || fail "the events do not show a resume before the lease"
import json, sys
evs, t = json.load(open(sys.argv[1]))["events"], int(sys.argv[2])
res = [e for e in evs if e["kind"] == "job.resume"]
assert len(res) == 1, [e["message"] for e in evs]
r = res[0]
print("job.resume %d ms after the kill: %s" % (r["time_ms"] - t, r["message"]))
assert "given up before its lease" in r["data"]["failures"], r["data"]
assert r["data"]["tier"] == "head", r["data"]
lost = [e for e in evs if e["kind"] == "worker.fail" and e["time_ms"] >= t]
assert lost and "suspected lost" in lost[0]["message"], [e["message"] for e in lost]
PY
limit=$((4000 * T_MULT)); [ "$limit" -gt 8000 ] && limit=8000
[ "$after" -le "$limit" ] ||
    fail "the next step came ${after} ms after the kill (limit ${limit} ms; the lease is 10 s)"
pass "a lone member's node SIGKILLed: the job resumed and stepped ${after} ms later (lease 10 s)"
