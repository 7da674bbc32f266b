#!/bin/sh
# submit_latency.sh [RUNS]: how long `hvsubmit -np 4 sleeper` takes to get 4 workers running on a
# local cluster (hvhead on 127.0.0.1:0 with the fast test timings of tests/lib.sh, two hvagents
# with 2 slots each). RUNS (default 10) jobs run one after the other; the binary is uploaded and
# fetched by the agents only in run 1, which is reported on its own line.
#
# "All running" is measured from outside hv: tests/perf/spawn_watch starts hvsubmit, then polls
# /proc every 1 ms for new processes whose cwd is under the agents' work dirs and that have
# finished execve (comm is no longer "hvagent"); the time of the 4th such process, from the
# moment hvsubmit was started, is the headline number ("exec'd"). Next to it the script prints
# the head's own view (time between the job's "submitted" and "running: 4 workers started"
# events, `hvctl --json events --job ID`) and a breakdown from the head's events and the agents'
# log lines (all wall-clock ms, same machine):
#   submit   head event "submitted": hvsubmit ran, hashed, (uploaded,) and called Submit
#   placed   head event "placing": the driver placed the job and sent the spawn orders
#   order    first agent log "spawn order" (HV-AGENT-SPAWN): the order reached an agent
#   fetched  last agent log HV-AGENT-FETCHED within the run (run 1 only; cached afterwards)
#   spawned  last agent log HV-AGENT-WORKER-START: uv_spawn returned for the 4th worker
#   exec'd   the 4th worker process had exec'd the program (spawn_watch, outside hv)
#   running  head event "running: 4 workers started": the head got all 4 started events
#   rdzv     head log HV-RDZV-ROUND: all 4 workers' hv_init met in the rendezvous
#   head     running - submit (the head's own view)
# Environment: BUILD (build dir, default build; binaries in $BUILD/bin and $BUILD/examples),
# SLEEP (seconds each worker sleeps, default 0.5), HV_KEEP_TMP=1 keeps the scratch dir.
# Loopback only; every process it starts is killed on exit; every wait is bounded.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) [ -d "$BUILD" ] || BUILD=$SRC/$BUILD ;; esac
BIN=${HV_BIN_DIR:-$BUILD/bin}
EX=${HV_EXAMPLES_DIR:-$BUILD/examples}
RUNS=${1:-10}
SLEEP=${SLEEP:-0.5}
TOKEN=hv-perf-token
PIDS=""
TMP=$(mktemp -d /tmp/hvperf.XXXXXX)

case $RUNS in ''|*[!0-9]*) echo "submit_latency: RUNS '$RUNS' is not a number" >&2; exit 2 ;; esac
[ "$RUNS" -ge 2 ] && [ "$RUNS" -le 1000 ] || { echo "submit_latency: RUNS: 2..1000" >&2; exit 2; }

# Worker processes of this script's agents (cwd under $TMP/agent-*).
workers() {
    for p in /proc/[0-9]*; do
        c=$(readlink "$p/cwd" 2>/dev/null) || continue
        case "$c" in "$TMP"/agent-*/jobs/*) echo "${p#/proc/}" ;; esac
    done
}

cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
    for p in $(workers); do kill -KILL "$p" 2>/dev/null; done
    if [ "${HV_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
    echo "submit_latency: $*" >&2
    for f in "$TMP"/*.err; do
        [ -f "$f" ] && { echo "----- $f" >&2; tail -n 15 "$f" >&2; }
    done
    exit 1
}

. "$SRC/tests/wait_for.sh" # wait_for SECONDS CMD...

need_bins() {
    missing=""
    for b in hvhead hvagent hvsubmit hvctl spawn_watch; do
        [ -x "$BIN/$b" ] || missing="$missing $b"
    done
    [ -x "$EX/sleeper" ] || missing="$missing sleeper"
    [ -z "$missing" ] && return 0
    [ -f "$BUILD/CMakeCache.txt" ] || die "missing$missing and no configured build in $BUILD"
    echo "submit_latency: building$missing in $BUILD" >&2
    # shellcheck disable=SC2086
    cmake --build "$BUILD" -j2 --target $missing >/dev/null || die "cannot build$missing"
}

# iso_ms: ISO log stamps (2026-11-21T02:17:37.746Z), one per line on stdin -> epoch ms.
iso_ms() { date -u -f - +%s%3N 2>/dev/null; }

# log_ms PATTERN FILES...: epoch ms of every log line matching PATTERN.
log_ms() {
    pat=$1; shift
    grep -h -- "$pat" "$@" 2>/dev/null | awk '{print $1}' | iso_ms
}

# stat_of: "median min max" of the numbers on stdin ("-" lines ignored).
stat_of() {
    grep -v '^-$' | sort -n | awk '{v[NR] = $1} END {
        if (NR == 0) { print "- - -"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'
}

need_bins
cat >"$TMP/head.yaml" <<EOF
cluster_name: perf
listen: 127.0.0.1:0
data_dir: $TMP/data
token: $TOKEN
heartbeat_ms: 200
lease_ms: 2000
kill_grace_ms: 1000
log_level: info
EOF
export HV_TOKEN_FILE="$TMP/data/client.token" # the CLIs' credential, written by the head
"$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/head.out" 2>"$TMP/head.err" &
PIDS="$PIDS $!"
wait_for 10 grep -q 'listening on' "$TMP/head.out" || die "hvhead did not print its ready line"
HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$TMP/head.out" | head -n 1)
for a in a b; do
    "$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name "node-$a" --slots 2 \
        --work-dir "$TMP/agent-$a" --log-level info >"$TMP/agent-$a.out" 2>"$TMP/agent-$a.err" &
    PIDS="$PIDS $!"
done
alive() {
    [ "$("$BIN/hvctl" --head "$HEAD" nodes 2>/dev/null | awk '$3 == "alive"' | wc -l)" -eq 2 ]
}
wait_for 15 alive || die "the two agents did not join"

echo "submit_latency: $RUNS x 'hvsubmit -np 4 sleeper $SLEEP' on hvhead + 2 hvagents x 2 slots," \
    "loopback; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ms after hvsubmit started (see the script's header for each column); head = running - submit"
printf "%4s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n" run submit placed order fetched spawned \
    "exec'd" running rdzv head
: >"$TMP/rows"
status=0
run=1
while [ $run -le "$RUNS" ]; do
    "$BIN/spawn_watch" --cwd-prefix "$TMP/agent-" --count 4 --timeout 60 \
        --cmd-out "$TMP/submit-$run.out" -- \
        "$BIN/hvsubmit" --head "$HEAD" -np 4 "$EX/sleeper" "$SLEEP" >"$TMP/watch-$run.out"
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "  run $run: hvsubmit exited $rc: $(tail -n 3 "$TMP/submit-$run.out")" >&2
        status=1
    fi
    wait_for 10 sh -c "[ -z \"\$(for p in /proc/[0-9]*; do readlink \$p/cwd; done 2>/dev/null |
        grep -F '$TMP/agent-' | grep /jobs/)\" ]" || echo "  run $run: workers still running" >&2
    id=$(sed -nE 's/^hvsubmit: job ([0-9]+) submitted.*/\1/p' "$TMP/submit-$run.out" | head -n 1)
    if [ -z "$id" ]; then
        echo "  run $run: no job id in hvsubmit's output" >&2
        status=1; run=$((run + 1)); continue
    fi
    t0=$(sed -nE 's/^t0_wall_ms=([0-9.]+)/\1/p' "$TMP/watch-$run.out")
    all=$(sed -nE 's/^all_ms=(.*)/\1/p' "$TMP/watch-$run.out")
    "$BIN/hvctl" --head "$HEAD" --json events --job "$id" >"$TMP/events-$run.json" 2>&1
    ev=$(awk '/"time_ms"/ {gsub(/[^0-9]/, "", $2); t = $2}
        /"message"/ && /submitted/ {s = t} /"message"/ && /placing/ {p = t}
        /"message"/ && /running:/ {r = t} END {print (s ? s : "-"), (p ? p : "-"), (r ? r : "-")}' \
        "$TMP/events-$run.json")
    order=$(log_ms "HV-AGENT-SPAWN: spawn order: worker [0-9]* of job $id " "$TMP"/agent-*.err |
        sort -n | head -n 1)
    spawned=$(log_ms "HV-AGENT-WORKER-START: worker [0-9]* of job $id " "$TMP"/agent-*.err |
        sort -n | tail -n 1)
    rdzv=$(log_ms "HV-RDZV-ROUND: job $id: round 1 closed" "$TMP/head.err" | head -n 1)
    # fetches are not tagged with a job: take those between the order and the last spawn
    fetched=$(log_ms "HV-AGENT-FETCHED" "$TMP"/agent-*.err |
        awk -v a="${order:-0}" -v b="${spawned:-0}" '$1 >= a && $1 <= b' | sort -n | tail -n 1)
    echo "$run $t0 $ev ${order:--} ${fetched:--} ${spawned:--} $all ${rdzv:--}" | awk '
        function rel(x) { return x == "-" ? "-" : sprintf("%.1f", x - $2) }
        { all = $9 < 0 ? "-" : sprintf("%.1f", $9)
          head = ($3 == "-" || $5 == "-") ? "-" : sprintf("%.1f", $5 - $3)
          printf "%4d %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", $1, rel($3), rel($4), rel($6),
              rel($7), rel($8), all, rel($5), rel($10), head }' | tee -a "$TMP/rows"
    case $all in -1|'') echo "  run $run: 4 workers were not seen running" >&2; status=1 ;; esac
    sleep 0.3
    run=$((run + 1))
done

echo
echo "runs 2..$RUNS (binary cached on the head and the agents): median / min / max ms"
col=2
for name in submit placed order fetched spawned "exec'd" running rdzv head; do
    printf "  %-8s %s\n" "$name" "$(awk -v c=$col '$1 > 1 {print $c}' "$TMP/rows" | stat_of |
        awk '{printf "%8s %8s %8s", $1, $2, $3}')"
    col=$((col + 1))
done
set -- $(awk '{print $7}' "$TMP/rows" | stat_of)
set -- "$@" $(awk '{print $10}' "$TMP/rows" | stat_of)
echo
echo "HEADLINE: median over all $RUNS runs: 4th worker exec'd $1 ms after hvsubmit started" \
    "(min $2, max $3); head's view (submitted -> running) median $4 ms"
exit $status
