#!/bin/sh
# Events and states as fields on the wire (proto/hv.proto: Event's structured fields, JobState,
# WorkerState, NodeState), through the real binaries: an elastic job on A(2) and B(2) loses its
# rank-0 worker to SIGKILL and ends 0. What a program reading `hvctl --json` would check, without
# reading any English message:
#  - job.state events carry the job's state (pending, placing, running, then succeeded with the
#    reason code succeeded);
#  - the worker's failure (worker.fail) names the worker, its rank and its node;
#  - generation 2's round.open says why as a code (failure, or data_plane when a survivor's
#    collective broke first) and that it rolls back; its round.close has the round's duration;
#  - `hvctl --json job` gives the states as words of the codes, and the round's reason code;
#  - `hvctl --json nodes` gives the nodes' states;
#  - the head's metrics count the reset under reason failure (they read the same fields).
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
MPORT=$(free_port)
elastic_cluster 2 "node-a node-b" "metrics:" "  listen: 127.0.0.1:$MPORT"

submit kill -np 4 --min-np 2 --max-np 4 -- --epochs 2 --kill-at 1:0:0 --step-delay-ms 5
wait_submit
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/kill.err" >&2; fail "a SIGKILLed worker must not fail the job (rc $SUB_RC)"; }
events 1
"$BIN/hvctl" --head "$HEAD" --json job 1 >"$TMP/job1.json" || fail "hvctl --json job 1 failed"
"$BIN/hvctl" --head "$HEAD" --json nodes >"$TMP/nodes.json" || fail "hvctl --json nodes failed"
curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" >"$TMP/metrics.txt" || fail "cannot scrape /metrics"

/usr/bin/python3 - "$TMP/events-1.json" "$TMP/job1.json" "$TMP/nodes.json" <<'PY' || fail "the events' and views' fields are not what happened"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
job = json.load(open(sys.argv[2]))
nodes = json.load(open(sys.argv[3]))
nodes = nodes["nodes"] if isinstance(nodes, dict) else nodes
def kinds(k):
    return [e for e in ev if e["kind"] == k]
states = [e.get("job_state") for e in kinds("job.state")]
print("job states:", states, file=sys.stderr)
assert states[:3] == ["pending", "placing", "running"], states
assert states[-1] == "succeeded", states
end = kinds("job.state")[-1]
assert end.get("reason") == "succeeded", end
fails = kinds("worker.fail")
assert fails, "no worker.fail event"
f = fails[0]
assert f.get("worker_id", 0) > 0 and f.get("rank") == 0 and f.get("node") == "node-a", f
opens = [e for e in kinds("round.open") if e.get("generation") == 2]
assert len(opens) == 1, kinds("round.open")
o = opens[0]
assert o.get("reason") in ("failure", "data_plane") and o.get("rollback") is True, o
first = [e for e in kinds("round.open") if e.get("generation") == 1]
assert first and first[0].get("reason") == "start" and "rollback" not in first[0], first
closes = [e for e in kinds("round.close") if e.get("generation") == 2]
assert closes and closes[0].get("reason") == o["reason"], closes
assert closes[0].get("duration_ms", 0) >= 1, closes  # the round waited for the re-joins
assert job["state"] == "succeeded", job["state"]
assert job["round_state"] == "closed", job["round_state"]
assert job["round_reason_code"] in ("failure", "data_plane", "grow"), job["round_reason_code"]
ws = {w["state"] for w in job["workers"]}
assert ws <= {"exited", "killed", "lost", "left"} and ws, ws
assert {n["state"] for n in nodes} == {"alive"}, [n["state"] for n in nodes]
PY
resets=$(sed -n 's/^hv_resets_total{reason="failure"} //p' "$TMP/metrics.txt")
[ "${resets:-0}" -ge 1 ] || { grep hv_resets_total "$TMP/metrics.txt" >&2; fail "hv_resets_total{reason=\"failure\"} should count the reset"; }
pass "job, worker and node states and the events' fields say what happened (reset: $(sed -n 's/.*"reason": "\(failure\|data_plane\)".*/\1/p' "$TMP/events-1.json" | head -n 1))"
