# tests/elastic.sh: helpers for the elastic integration and fault tests (sourced after lib.sh).
# They run examples/elastic_train (a real MLP on Fashion-MNIST, shortened with --train-limit)
# through hvsubmit against a real head and agents, and read what a user would read: the epoch
# lines on hvsubmit's stdout, its exit status, `hvctl job`, `hvctl nodes` and the rounds in
# `hvctl events --json`. Every wait is bounded (T_MULT scales them under sanitizers).

TRAIN=$EX/elastic_train
# Short epochs that still learn: 4000 samples, 1000 test samples, global batch 64.
TRAIN_ARGS="--train-limit 4000 --test-limit 1000 --batch 64"

# A head with fast leases and elastic settings that suit tests (extra yaml lines may follow).
start_elastic_head() {
    start_head "elastic:" "  rendezvous_timeout_s: ${RDZV_S:-20}" \
        "  blacklist_cooldown_s: ${COOLDOWN_S:-60}" \
        "  blacklist_max_cooldown_s: ${COOLDOWN_MAX_S:-600}" \
        "  blacklist_max_strikes: ${MAX_STRIKES:-5}" "$@"
}

# submit NAME ARGS...: runs hvsubmit in the background; output in $TMP/NAME.out / .err, its pid
# in SUB_PID. ARGS are hvsubmit options, then the program's arguments after "--".
submit() {
    local name=$1; shift
    local opts="" prog=""
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts="$opts $1"; shift; done
    [ "${1:-}" = "--" ] && shift
    # shellcheck disable=SC2086
    "$BIN/hvsubmit" --head "$HEAD" $opts "$TRAIN" $TRAIN_ARGS "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" &
    SUB_PID=$!
    PIDS="$PIDS $SUB_PID"
}

# wait_submit: waits (bounded) for the last submit; sets SUB_RC.
wait_submit() {
    local secs=$(( ${1:-120} * T_MULT )) i=0
    while kill -0 "$SUB_PID" 2>/dev/null; do
        [ $i -ge $(( secs * 10 )) ] && { kill -INT "$SUB_PID"; fail "hvsubmit did not end within ${secs}s"; }
        sleep 0.1; i=$((i + 1))
    done
    wait "$SUB_PID"; SUB_RC=$?
}

# while_running SECS CMD...: polls CMD every 0.1 s until it succeeds (0); 1 when SECS pass or
# the last submit's hvsubmit ends first (a job that failed is not waited for).
while_running() {
    local secs=$(( $1 * T_MULT )) i=0; shift
    while [ $i -lt $(( secs * 10 )) ]; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        kill -0 "$SUB_PID" 2>/dev/null || { "$@" >/dev/null 2>&1; return; }
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

# wait_epoch NAME E: rank 0 printed the line of epoch E.
wait_epoch() {
    wait_for "${3:-90}" grep -q "elastic_train: epoch=$2 " "$TMP/$1.out" || fail "epoch $2 was not reached"
}

# epoch_lines NAME: the epoch lines, without the [rank]<stdout>: prefix; from $TMP/NAME.epochs
# when the run wrote them there too (elastic_train --epoch-log: a node killed without notice
# can take the last lines it wrote to the log stream with it, a file write it cannot).
epoch_lines() {
    if [ -f "$TMP/$1.epochs" ]; then
        sed -n 's/^elastic_train: epoch=/epoch=/p' "$TMP/$1.epochs"
    else
        sed -n 's/^\[[0-9]*\]<stdout>:elastic_train: epoch=/epoch=/p' "$TMP/$1.out"
    fi
}

# check_exact NAME EPOCHS: every epoch was printed once, processed each sample exactly once.
check_exact() {
    local n; n=$(epoch_lines "$1" | wc -l)
    [ "$n" -eq "$2" ] || fail "$1: expected $2 epoch lines, got $n"
    if epoch_lines "$1" | grep -v "duplicates=0 exact=1" | grep -q .; then
        epoch_lines "$1" >&2
        fail "$1: an epoch did not process every sample exactly once"
    fi
    for e in $(seq 0 $(( $2 - 1 ))); do
        [ "$(epoch_lines "$1" | grep -c "^epoch=$e ")" -eq 1 ] || fail "$1: epoch $e printed $(epoch_lines "$1" | grep -c "^epoch=$e ") times"
    done
}

# final_accuracy NAME: from the "done" line.
final_accuracy() { sed -n 's/.*elastic_train: done .*accuracy=\([0-9.]*\).*/\1/p' "$TMP/$1.out" | tail -n 1; }

# close_enough A B TOL: |A - B| <= TOL.
close_enough() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

# events JOB: the job's events as JSON (hvctl events --json) into $TMP/events-JOB.json.
events() { "$BIN/hvctl" --head "$HEAD" events --job "$1" --json --limit 1000 >"$TMP/events-$1.json" 2>&1; }

# rounds JOB: one line per closed round: "G SIZE ROLLBACK RANK0 REASON" (from the event data).
rounds() {
    events "$1"
    /usr/bin/python3 - "$TMP/events-$1.json" <<'PY'
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
for e in evs:
    if e["kind"] == "round.close":
        d = e["data"]
        print(d["generation"], d["size"], "rollback" if d["rollback"] else "-", d["rank0"], d["reason"])
PY
}

# round_json_ok JOB: every round.close event has the fields a user reads (generation, size,
# members with ranks and nodes, reason, wait time, rollback) and consistent sizes.
round_json_ok() {
    events "$1"
    /usr/bin/python3 - "$TMP/events-$1.json" <<'PY'
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
closes = [e["data"] for e in evs if e["kind"] == "round.close"]
opens = [e["data"] for e in evs if e["kind"] == "round.open"]
assert closes, "no round.close event"
for d in closes:
    for k in ("generation", "size", "reason", "rollback", "wait_ms", "members", "rank0", "added", "removed"):
        assert k in d, "round.close lacks %s: %r" % (k, d)
    assert len(d["members"]) == d["size"], d
    assert sorted(m["rank"] for m in d["members"]) == list(range(d["size"])), d
gens = [d["generation"] for d in closes]
assert gens == sorted(gens) and len(set(gens)) == len(gens), gens
for d in opens:
    assert "generation" in d and "reason" in d and "rollback" in d, d
PY
}

# node_of_rank0 NAME: the node that runs rank 0 in the first epoch line.
rank0_node() { epoch_lines "$1" | sed -n "s/^epoch=$2 .*rank0=\([^ ]*\).*/\1/p"; }

# agent_workers NAME: pids of worker processes of agent NAME.
# One find over /proc, as lib.sh's workers: a readlink process per pid took seconds per scan on a
# loaded machine, long enough for a short job to end before the test killed its node.
agent_workers() {
    find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$TMP/agent-$1/jobs/*" 2>/dev/null | cut -d/ -f3
}

# all_failed_reason JOB ERRFILE: the failed job's reason (in hvsubmit's ERRFILE) names its
# generation's exits: "rank R on node-X exited with status 1", or "was lost: its process ended"
# for a rank whose exit a ring neighbour on this machine saw first (the death watch); every rank
# named lost has its status 1 in the events (worker.fail, or the job.note of its agent's report,
# which may come a moment after the job's end). Prints the generation that failed.
all_failed_reason() {
    _re="job $1 failed: (all [0-9] workers|no worker) of generation ([0-9]+) (failed|survived to hold the training state): rank [0-9] on node-. (exited with status 1|was lost: its process ended)"
    grep -E "$_re" "$2" >/dev/null || fail "the reason must name the exits"
    wait_for 10 statuses_told "$1" || { statuses_told "$1"; fail "every rank's exit status 1 must be in the events"; }
    sed -En "s/.*$_re.*/\\2/p" "$2"
}
statuses_told() { # JOB
    events "$1"
    /usr/bin/python3 - "$TMP/events-$1.json" <<'PY'
import json, re, sys
evs = json.load(open(sys.argv[1]))["events"]
told = {m.group(1) for e in evs if e["kind"] in ("worker.fail", "job.note")
        for m in [re.match(r"(rank [0-9] on node-.) exited with status 1", e["message"])] if m}
lost = {m.group(1) for e in evs if e["kind"] == "worker.fail"
        for m in [re.match(r"(rank [0-9] on node-.) was lost: its process ended", e["message"])] if m}
assert told and lost <= told, (sorted(told), sorted(lost))
PY
}

# ---- Shared setup and checks of the elastic integration and fault tests (dedupsh) ----

# elastic_cluster SLOTS "NODE..." [yaml lines...]: hv_setup, an elastic head (start_elastic_head
# with the yaml lines) and one agent of SLOTS slots for each NODE.
elastic_cluster() {
    local slots="$1" nodes="$2"; shift 2
    hv_setup
    start_elastic_head "$@"
    # shellcheck disable=SC2086 # NODE...: one word each
    start_agents "$slots" $nodes
}

# job_copy FIELD [JOB]: FIELD (commit, generation) of the head's copy of JOB's state (job 1
# unless told); 0 while there is none.
job_copy() {
    "$BIN/hvctl" --head "$HEAD" job "${2:-1}" --json 2>/dev/null |
        /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin).get('copy', {}).get('$1', 0))"
}
# round_size_is JOB N: the job's newest round formed with N workers (hvctl job's GENERATION line;
# the fleet tests wait for it; lib.sh state_is waits for a state).
round_size_is() { "$BIN/hvctl" --head "$HEAD" job "$1" 2>/dev/null | grep -q "GENERATION: .* ($2 workers)"; }
has_copy() { [ "$(job_copy commit)" -gt 0 ]; }
copy_past() { [ "$(job_copy commit "${2:-1}")" -ge "$1" ]; } # COMMIT [JOB]

# steps_once NAME EPOCHS: rank 0's --step-log ($TMP/NAME.steps, "EPOCH BATCH GENERATION" as each
# step starts) shows every step of the EPOCHS epochs started exactly once (none redone after a
# reset), each epoch the same batches 0..S-1.
steps_once() {
    /usr/bin/python3 - "$TMP/$1.steps" "$2" <<'PY' || fail "$1: a step was started twice or skipped"
import collections, sys
steps = [tuple(map(int, l.split()[:2])) for l in open(sys.argv[1]) if l.strip()]
again = [s for s, n in collections.Counter(steps).items() if n > 1]
assert not again, "steps started more than once (epoch, batch): %r" % again[:10]
per = collections.defaultdict(set)
for e, b in steps:
    per[e].add(b)
n = len(per[0])
assert sorted(per) == list(range(int(sys.argv[2]))), sorted(per)
assert n > 0 and all(per[e] == set(range(n)) for e in per), {e: len(per[e]) for e in per}
print("%d steps, each started once (%d epochs of %d)" % (len(steps), len(per), n))
PY
}

# bench_job NAME SECONDS: a one-worker elastic job of tests/perf/bench_elastic (copies of its state
# at the head, up to 10 resets) in the background, as submit starts one; waits for its first step.
bench_job() {
    "$BIN/hvsubmit" --head "$HEAD" -np 1 --min-np 1 --max-np 1 --max-resets 10 \
        "$BIN/bench_elastic" --model 65536 --seconds "$2" --step-ms 5 >"$TMP/$1.out" 2>"$TMP/$1.err" &
    SUB_PID=$!
    PIDS="$PIDS $SUB_PID"
    wait_for 60 grep -q "BENCH step [0-9]* gen=1 " "$TMP/$1.out" || fail "the job did not start"
}

# kill_node NAME N: SIGKILLs node NAME's agent and its workers together (a node gone without
# notice), after checking that they are N processes; T_KILL is the time of the kill in ms.
kill_node() {
    local victims
    victims="$(agent_pid "$1") $(agent_workers "$1")"
    # shellcheck disable=SC2086 # pids: one word each
    [ "$(echo $victims | wc -w)" -eq "$2" ] || fail "expected $1's agent and $(($2 - 1)) worker(s), got: $victims"
    T_KILL=$(date +%s%3N)
    # shellcheck disable=SC2086
    kill -KILL $victims
}

# wait_epoch_logged NAME E: rank 0 wrote the line of epoch E to $TMP/NAME.epochs (--epoch-log).
wait_epoch_logged() {
    wait_for "${3:-90}" grep -q "elastic_train: epoch=$2 " "$TMP/$1.epochs" || fail "epoch $2 was not reached"
}

# kill_workers_of NODE: SIGKILLs the job workers of agent NODE (there must be one); the agent
# stays.
kill_workers_of() {
    local victims
    victims=$(agent_workers "$1")
    [ -n "$victims" ] || fail "no worker of $1 to kill"
    # shellcheck disable=SC2086 # pids: one word each
    kill -KILL $victims
}

# drain_waits_below_min: drains node-a (a preemption notice) and checks that job 1's round then
# stays open and the job keeps running (what is left is below its --min-np).
drain_waits_below_min() {
    "$BIN/hvctl" --head "$HEAD" drain node-a --reason "preemption notice" >"$TMP/drain.out" || fail "hvctl drain"
    assert_grep "$TMP/drain.out" "draining"
    wait_for 30 sh -c "'$BIN/hvctl' --head '$HEAD' job 1 | grep -q 'ROUND:.*open'" || fail "the round should stay open below min-np"
    sleep 1
    "$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job-waiting.txt"
    assert_grep "$TMP/job-waiting.txt" "running" "the job must wait, not fail"
}

# ended_ok SECS WHAT: waits (at most SECS) for the last submit, which must end 0 (else fails: WHAT).
ended_ok() {
    wait_submit "$1"
    [ "$SUB_RC" -eq 0 ] || fail "$2 (hvsubmit rc $SUB_RC)"
}

# fails_below_min NAME MIN_NP SECS: drains node-a under job NAME (its --elastic-timeout 3): the
# job must fail within SECS, hvsubmit saying that its --min-np MIN_NP was not met in time.
fails_below_min() {
    "$BIN/hvctl" --head "$HEAD" drain node-a >/dev/null || fail "drain node-a"
    wait_submit "$3"
    [ "$SUB_RC" -ne 0 ] || fail "the job should fail when min-np is not met within the elastic timeout"
    assert_grep "$TMP/$1.err" "--min-np is $2, and the elastic timeout (3 s) passed" "hvsubmit must say why"
}

# rank0_failed JOB HOW: job JOB (-np 4 on node-a and node-b) went on after rank 0 on node-a
# failed (HOW: "was killed by signal SIGKILL", "exited with status 1"): its g2 rolled back to 2
# workers on node-b, the round's reason naming HOW, or the end a ring neighbour on this machine
# saw first (the death watch: "was lost: its process ended"; the agent's report of HOW is then a
# job.note); exactly one worker.fail or job.note event tells HOW.
rank0_failed() {
    rounds "$1" >"$TMP/rounds-$1"; cat "$TMP/rounds-$1"
    sed -n 2p "$TMP/rounds-$1" | grep -Eq "^2 2 rollback node-b .*failure: rank 0 on node-a ($2|was lost: its process ended)" \
        || fail "g2 should roll back to 2 workers on node-b after rank 0 on node-a $2"
    events "$1"
    /usr/bin/python3 - "$TMP/events-$1.json" "rank 0 on node-a $2" <<'PY' || fail "the events must tell that rank 0 on node-a $2"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
k = [e for e in evs if e["kind"] in ("worker.fail", "job.note") and e["message"].startswith(sys.argv[2])]
assert len(k) == 1, [(e["kind"], e["message"]) for e in evs]
PY
}

# barred_once JOB: one node.blacklist event, node-a barred from JOB for a first strike (not for
# good).
barred_once() {
    /usr/bin/python3 - "$TMP/events-$1.json" "$1" <<'PY' || fail "node-a should have been barred from job $1"
import json, sys
bl = [e for e in json.load(open(sys.argv[1]))["events"] if e["kind"] == "node.blacklist"]
assert len(bl) == 1, bl
assert "node node-a is barred from job %s" % sys.argv[2] in bl[0]["message"], bl[0]
assert bl[0]["data"]["strikes"] == 1 and not bl[0]["data"]["permanent"], bl[0]
PY
}

# all_failed JOB NAME: job JOB (run NAME), whose every rank exits 1, failed with hvsubmit's
# status 1 and a reason naming the exits (all_failed_reason), and no round closed after the
# generation that failed, G.
all_failed() {
    [ "$SUB_RC" -eq 1 ] || fail "all ranks failing must fail the job with their status 1 (got $SUB_RC)"
    G=$(all_failed_reason "$1" "$TMP/$2.err") || exit 1
    rounds "$1" >"$TMP/rounds-$1"; cat "$TMP/rounds-$1"
    [ "$(wc -l <"$TMP/rounds-$1")" -eq "$G" ] || fail "no round after g$G may close when every worker of g$G failed"
}

# ran_exact NAME EPOCHS SECS WHAT: the last submit (run NAME) ends 0 within SECS (else fails:
# WHAT), and every one of its EPOCHS epochs was printed once and processed each sample once.
ran_exact() {
    ended_ok "$3" "$4"
    check_exact "$1" "$2"
}

# reference_run OPTS...: run "ref" (submit's hvsubmit options, then "--" and elastic_train's) of 3
# epochs without failures: it ends 0, every epoch exact.
reference_run() {
    submit ref "$@" --epochs 3
    ran_exact ref 3 120 "the reference run failed"
}

# submit_logged NAME ARGS...: submit NAME ARGS... with --epoch-log $TMP/NAME.epochs after the
# program's arguments (rank 0 writes its epoch lines there too); waits until epoch 0 is logged.
submit_logged() {
    local name=$1
    shift
    submit "$name" "$@" --epoch-log "$TMP/$name.epochs"
    wait_epoch_logged "$name" 0
}
