#!/bin/sh
# Copies kept by peers (issue 28 §3): a one-worker elastic job on node-a (zone a) sends each
# committed copy of its state straight to another node's agent, chosen in another zone (node-b,
# zone b, over node-c, zone a); the head stores only the index. Checked: hvctl job names the
# keeper, the store's index (peer_copies) names node-b, the head's bytes for copies stay 0 in
# /metrics and its states directory holds no copy. Then node-a is killed without notice (agent
# and worker SIGKILLed): the job resumes on another node from node-b's copy (read from the
# keeper, not the head), ends 0, and every epoch is exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=2000
MPORT=$(free_port)
start_elastic_head "metrics:" "  listen: 127.0.0.1:$MPORT"
start_agent node-a 1 --labels zone=a --log-level info
assert_grep "$TMP/agent-node-a.err" "keeps other nodes' jobs' state copies at 127.0.0.1:" "the agent should serve copies"

submit lost -np 1 --min-np 1 --max-np 1 --env HV_STATE_COPY_FACTOR=2 --env HV_LOG_LEVEL=notice -- --epochs 4 --step-delay-ms 40 --epoch-log "$TMP/lost.epochs"
wait_for 30 sh -c "[ -n \"\$(find /proc -mindepth 2 -maxdepth 2 -name cwd -lname '$TMP/agent-node-a/jobs/*' 2>/dev/null)\" ]" ||
    fail "the job's worker did not start on node-a"
start_agent node-b 1 --labels zone=b --log-level info
start_agent node-c 1 --labels zone=a
wait_epoch lost 0

jobjson() { "$BIN/hvctl" --head "$HEAD" job 1 --json 2>/dev/null; }
kept_past() { # COMMIT: node-b keeps a copy past it
    jobjson | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(0 if j.get("copy_keeper") == "node-b" and j.get("copy", {}).get("commit", 0) >= int(sys.argv[1]) else 1)' "$1"
}
# An epoch is 63 steps (4000 samples, batch 64), each a commit, plus the first round's and the
# epoch end's: a copy past commit 70 holds epoch 0's end.
wait_for 30 kept_past 70 || { jobjson >&2; fail "node-b keeps no copy past epoch 0"; }
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-before.txt"
assert_grep "$TMP/job-before.txt" "STATE COPY: kept by node node-b's agent: generation 1, commit" "hvctl job should name the keeper"
node_b=$(sqlite3 -readonly "$TMP/data/state.db" "SELECT id FROM nodes WHERE name = 'node-b'")
idx=$(sqlite3 -readonly "$TMP/data/state.db" "SELECT node_id, generation, commit_no, size FROM peer_copies WHERE job_id = 1")
echo "index: $idx (node-b is $node_b)"
[ "${idx%%|*}" = "$node_b" ] || fail "the store's index should name node-b ($node_b) as the keeper: '$idx'"
# The head's bytes for copies: the copy of the first commit, when node-a was the only node (no
# keeper: the fallback), at most; none since node-b keeps them.
copy_bytes() { curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" | sed -n "s/^hv_state_copy_bytes_total{kept_by=\"$1\"} //p"; }
head0=$(copy_bytes head) peer0=$(copy_bytes peer)
echo "copy bytes: head $head0, peer $peer0"
[ "$peer0" -gt 0 ] || fail "no peer copy counted in /metrics"
[ "$(find "$TMP/data/states" -type f 2>/dev/null | wc -l)" -le 1 ] || fail "the head's states directory holds more than the first copy: $(ls "$TMP/data/states")"
assert_grep "$TMP/agent-node-b.err" "keeps job 1's copy of generation 1" "node-b's agent should log the copies it keeps"

kill -KILL $(agent_pid node-a) $(agent_workers node-a)
wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/lost.err" >&2; fail "the job should resume from node-b's copy (rc $SUB_RC)"; }
check_exact lost 4
cat "$TMP/lost.out" "$TMP/lost.err" >"$TMP/lost.all"
assert_grep "$TMP/lost.all" "from the peer keeper, node node-b's agent at 127.0.0.1:" "the resume should read the keeper's copy"
assert_no_grep "$TMP/lost.all" "reading the head's newest copy instead" "the resume fell back to the head"
assert_grep "$TMP/lost.err" "new workers load the copy kept by node node-b's agent of generation 1" "hvsubmit should say where the resume's copy is"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-after.txt"
assert_grep "$TMP/job-after.txt" "RESUMED:    1 time from a peer agent's copy"
events 1
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "the events do not show the resume"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
res = [e for e in evs if e["kind"] == "job.resume"]
assert len(res) == 1, [e["message"] for e in evs]
d = res[0]["data"]
assert d["copy_generation"] == 1 and d["copy_commit"] >= 70 and d["resumes"] == 1, d
assert d["tier"] == "peer", d
closes = [e["data"] for e in evs if e["kind"] == "round.close"]
assert closes[-1]["generation"] == d["generation"] and closes[-1]["rank0"] in ("node-b", "node-c"), closes[-1]
PY
head1=$(copy_bytes head) peer1=$(copy_bytes peer)
echo "copy bytes at the end: head $head1, peer $peer1"
[ "$head1" -eq "$head0" ] || fail "the head took copy bytes while a keeper was there: $head0 -> $head1"
[ "$peer1" -gt "$peer0" ] || fail "the resumed job's copies were not kept by a peer"
pass "a job's copies are kept by a peer in another zone, the head takes none, and the job resumes from the keeper's copy exactly"
