#!/bin/sh
# Every member of a 4-worker elastic job is lost at once, and the head's own copy cannot help:
# the durable tier (state_copies.durable.dir, written every second) brings the job back. The head
# keeps copies in <data>/states/, mirrored to a "shared" directory; the states directory is
# removed (the disk that held it is lost) and all four agents and their workers are SIGKILLed
# together. The head notices its copy is gone, resumes the job from the durable copy (restoring it
# into <data>/states/ first), and places it on two new agents; the job ends 0 with every epoch
# exact, and its events and `hvctl job` say it resumed from the durable copy.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=2000
# DURABLE_TIER=command (tests/fault/elastic_durable_command.sh): the same through upload and
# download commands into a directory that stands for an object store.
if [ "${DURABLE_TIER:-dir}" = command ]; then
    mkdir -p "$TMP/shared"
    start_elastic_head "state_copies:" "  durable:" "    upload: cp {file} $TMP/shared/{key}" \
        "    download: cp $TMP/shared/{key} {file}" "    remove: rm -f $TMP/shared/{key}" \
        "    interval_s: 1"
else
    start_elastic_head "state_copies:" "  durable:" "    dir: $TMP/shared" "    interval_s: 1"
fi
# The agents keep no copies (--copy-memory 0): the head keeps them, as this test's subject is its
# copies lost and the durable tier behind them (peers keeping copies: fault.elastic_peer_copy).
for n in a b c d; do start_agent "node-$n" 1 --copy-memory 0; done

# Copies at least every second even where they cost more (a sanitizer build).
submit r -np 4 --min-np 1 --max-np 4 --env HV_STATE_COPY_FACTOR=2 -- --epochs 3 --step-delay-ms 40 --epoch-log "$TMP/r.epochs"
wait_epoch r 0
# Past commit 70 the durable copy holds epoch 0's end (63 steps an epoch, each a commit).
wait_for 30 sh -c "[ \$(\"$BIN/hvctl\" --head \"$HEAD\" job 1 --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get(\"durable_copy\", {}).get(\"commit\", 0))') -ge 70 ]" \
    || fail "the durable tier holds no copy past epoch 0"
ls "$TMP/shared"/*.bin >/dev/null 2>&1 || fail "no copy in the durable directory"
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-before.txt"
assert_grep "$TMP/job-before.txt" "DURABLE:    generation" "hvctl job must show the durable copy"

# The head's copies are lost (the states directory goes at once: a rename, so no copy being
# written can keep it); the head notices, and then every agent and worker is SIGKILLed at once
# (their pids gathered first: finding them takes a while on a loaded machine).
pids="$(agent_pid node-a) $(agent_pid node-b) $(agent_pid node-c) $(agent_pid node-d)"
pids="$pids $(workers)"
[ $(echo $pids | wc -w) -ge 8 ] || fail "expected 4 agents and 4 workers, got pids: $pids"
mv "$TMP/data/states" "$TMP/states.lost"
wait_for 10 grep -q "HV-COPY-MISSING" "$TMP/head.err" || fail "the head did not notice its copy was gone"
# shellcheck disable=SC2086
kill -KILL $pids
rm -rf "$TMP/states.lost"
wait_for 20 grep -q "resume: every member was lost" "$TMP/r.err" || { cat "$TMP/r.err" >&2; fail "the head did not decide to resume"; }
start_agent node-e 1
start_agent node-f 1
wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/r.err" >&2; fail "the job must resume from the durable copy and end 0 (rc $SUB_RC)"; }
check_exact r 3
"$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-after.txt"
assert_grep "$TMP/job-after.txt" "RESUMED:    1 time from the durable copy" "hvctl job must say the job resumed from the durable copy"
events 1
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "the events do not tell the resume from the durable copy"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
res = [e for e in evs if e["kind"] == "job.resume"]
assert len(res) == 1, [e["message"] for e in evs]
assert res[0]["data"]["tier"] == "durable", res[0]
assert "from the durable copy" in res[0]["message"], res[0]["message"]
rest = [e for e in evs if e["kind"] == "job.restore"]
assert len(rest) == 1 and rest[0]["seq"] > res[0]["seq"], [e["message"] for e in rest]
g = res[0]["data"]["generation"]
close = [e for e in evs if e["kind"] == "round.close" and e["data"]["generation"] == g]
assert len(close) == 1 and close[0]["data"]["rank0"] in ("node-e", "node-f"), close
PY
# The durable copy goes with the job that succeeded (replaced ones went before).
wait_for 10 sh -c "! ls '$TMP/shared' | grep -q '\.bin\$'" || fail "the tier still holds copies of a job that succeeded: $(ls "$TMP/shared")"
pass "a 4-worker job whose every node and the head's copy are lost resumes from the durable copy (${DURABLE_TIER:-dir})"
