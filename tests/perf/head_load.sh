#!/bin/sh
# head_load.sh [AGENTS...]: what hvhead costs with many agents connected and heartbeating.
# For each count (default 100) it starts a fresh head on 127.0.0.1:0 with the default timings
# (heartbeat_ms 1000, lease_ms 10000), measures it idle, then runs tests/perf/agent_load with that
# many simulated agents (Join + Session + a heartbeat a second, one connection each), and after
# every session is up samples the head's /proc/PID/stat (utime+stime) and /proc/PID/status
# (VmRSS, VmHWM) at the start and the end of a steady window. It prints one table row per count
# and exits 1 if any session was not established, was lost, or `hvctl nodes` did not list every
# simulated node alive.
#   head_load.sh            100 agents
#   head_load.sh 10 100 500 three runs, one row each
# Environment: BUILD (build dir, default build; binaries in $BUILD/bin), WINDOW (steady window in
# s, default 20), SETTLE (s between the last session up and the window, default 3), IDLE (idle
# window in s, default 5), JOINS (agent_load --window: agents at most between their Join and
# their session's first answer, default 256; 0 = all at their ramp times), UP_WAIT (s to wait for
# every session, default ramp + 30 + N/50), NICE (run hvhead and agent_load under `nice -n NICE`,
# e.g. -10 as root, so that on a shared machine they are not starved: say so beside the figures;
# default: not set, the machine's default priority), HV_KEEP_TMP=1 keeps the scratch dir, PERF=FILE
# records a perf profile of hvhead over the steady window into FILE-N for each count N
# (`perf report -i FILE-N`; PERF_G="--call-graph dwarf" for whole stacks).
# Loopback only; every process it starts is killed on exit; every wait is bounded.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) [ -d "$BUILD" ] || BUILD=$SRC/$BUILD ;; esac
BIN=${HV_BIN_DIR:-$BUILD/bin}
WINDOW=${WINDOW:-20}
SETTLE=${SETTLE:-3}
IDLE=${IDLE:-5}
JOINS=${JOINS:-256}
TOKEN=hv-perf-token
HZ=$(getconf CLK_TCK)
PIDS=""
TMP=$(mktemp -d /tmp/hvperf.XXXXXX)

cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
    if [ "${HV_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "head_load: $*" >&2; exit 1; }

need_bins() {
    missing=""
    for b in hvhead hvctl agent_load; do [ -x "$BIN/$b" ] || missing="$missing $b"; done
    [ -z "$missing" ] && return 0
    [ -f "$BUILD/CMakeCache.txt" ] ||
        die "missing$missing in $BIN and no configured build in $BUILD"
    echo "head_load: building$missing in $BUILD" >&2
    # shellcheck disable=SC2086
    cmake --build "$BUILD" -j2 --target $missing >/dev/null || die "cannot build$missing"
}

now() { date +%s.%N; }
# cpu_ticks PID: utime + stime (fields 14 and 15 of /proc/PID/stat; comm has no spaces here).
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# runq_ns PID: nanoseconds its threads spent runnable but waiting for a CPU (schedstat field 2,
# summed over /proc/PID/task/*; threads that ended are not counted).
runq_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $2} END {printf "%.0f", s}'; }
# mem_kb PID FIELD: VmRSS or VmHWM in kB.
mem_kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
# cpu_pct T0 T1 TICKS0 TICKS1: percent of one core.
cpu_pct() { awk -v a="$1" -v b="$2" -v x="$3" -v y="$4" -v hz="$HZ" \
    'BEGIN {printf "%.1f", (y - x) / hz / (b - a) * 100}'; }

. "$SRC/tests/wait_for.sh" # wait_for SECONDS CMD...

stop_pid() { # PID: TERM, then KILL after 5 s
    kill -TERM "$1" 2>/dev/null || return 0
    wait_for 5 sh -c "! kill -0 $1 2>/dev/null" || kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

# run_one N: prints one table row; returns 1 if the run failed a check.
run_one() {
    n=$1
    d=$TMP/run-$n
    mkdir -p "$d"
    # Every simulated agent connects from 127.0.0.1: one client address to the head's connection
    # gate, whose derived bound per client is half of (open-file limit - 64) / 2 (4,984 with
    # 20,000 files), and whose total is under 10,000 there: joins past it were refused and
    # timed out. Real agents come from their own addresses; here the bounds are set above N.
    conns_max=$((2 * n + 256)) # a quarter of the total is kept for nodes; joins come first
    cat >"$d/head.yaml" <<EOF
cluster_name: perf
listen: 127.0.0.1:0
data_dir: $d/data
token: $TOKEN
heartbeat_ms: 1000
lease_ms: 10000
limits:
  max_connections: $conns_max
  max_connections_per_client: $conns_max
EOF
    export HV_TOKEN_FILE="$d/data/client.token" # the CLIs' credential, written by the head
    $nice "$BIN/hvhead" start --config "$d/head.yaml" >"$d/head.out" 2>"$d/head.err" &
    hp=$!
    PIDS="$PIDS $hp"
    wait_for 10 grep -q 'listening on' "$d/head.out" || die "hvhead did not print its ready line
$(tail -n 20 "$d/head.err")"
    head=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$d/head.out" | head -n 1)
    port=${head##*:}

    # idle head
    sleep 1
    t0=$(now); c0=$(cpu_ticks $hp)
    sleep "$IDLE"
    t1=$(now); c1=$(cpu_ticks $hp)
    idle_cpu=$(cpu_pct "$t0" "$t1" "$c0" "$c1")
    rss_idle=$(mem_kb $hp VmRSS)

    ramp=$((n * 5)); [ $ramp -lt 1000 ] && ramp=1000
    # agent_load's own bound; the script ends it with SIGTERM once it has sampled the head
    upwait=${UP_WAIT:-$((ramp / 1000 + 30 + n / 50))}
    dur=$((upwait + SETTLE + WINDOW + 30))
    $nice "$BIN/agent_load" --head "$head" --token "$TOKEN" --agents "$n" --duration "$dur" \
        --ramp-ms "$ramp" --window "$JOINS" --prefix "perf$n" >"$d/load.out" 2>"$d/load.err" &
    lp=$!
    PIDS="$PIDS $lp"
    up=yes
    # bounded in wall time (wait_for counts its 0.1 s polls, which stretch on a loaded machine)
    until_t=$(($(date +%s) + upwait))
    until grep -q 'sessions established' "$d/load.out"; do
        [ "$(date +%s)" -lt "$until_t" ] || { up=no; break; }
        sleep 1
    done
    sleep "$SETTLE"
    load1=$(cut -d' ' -f1 /proc/loadavg)
    t2=$(now); c2=$(cpu_ticks $hp); l2=$(cpu_ticks $lp 2>/dev/null || echo 0)
    q2=$(runq_ns $hp); lq2=$(runq_ns $lp)
    kill -USR1 $lp 2>/dev/null # agent_load prints its counts: the window's heartbeats
    pp=""
    if [ -n "${PERF:-}" ]; then
        perf record -F 997 ${PERF_G:--g} -p "$hp" -o "$PERF-$n" -- sleep "$WINDOW" >"$d/perf.out" 2>&1 &
        pp=$!
        PIDS="$PIDS $pp"
    fi
    sleep "$WINDOW"
    [ -z "$pp" ] || wait "$pp"
    t3=$(now); c3=$(cpu_ticks $hp); l3=$(cpu_ticks $lp 2>/dev/null || echo 0)
    q3=$(runq_ns $hp); lq3=$(runq_ns $lp)
    kill -USR1 $lp 2>/dev/null
    load1="$load1-$(cut -d' ' -f1 /proc/loadavg)"
    hq=$(awk -v a="$t2" -v b="$t3" -v x="$q2" -v y="$q3" 'BEGIN {printf "%.0f", (y - x) / 1e7 / (b - a)}')
    lq=$(awk -v a="$t2" -v b="$t3" -v x="$lq2" -v y="$lq3" 'BEGIN {printf "%.0f", (y - x) / 1e7 / (b - a)}')
    rss=$(mem_kb $hp VmRSS); hwm=$(mem_kb $hp VmHWM)
    cpu=$(cpu_pct "$t2" "$t3" "$c2" "$c3")
    lcpu=$(cpu_pct "$t2" "$t3" "$l2" "$l3")
    alive=$("$BIN/hvctl" --head "$head" nodes 2>"$d/hvctl.err" |
        awk -v p="perf$n-" 'index($1, p) == 1 && $3 == "alive"' | wc -l)
    conns=$(ss -Htn state established "( sport = :$port )" 2>/dev/null | wc -l)
    kill -TERM $lp 2>/dev/null
    wait_for 15 sh -c "! kill -0 $lp 2>/dev/null" || kill -KILL $lp 2>/dev/null
    wait $lp; lrc=$?
    stop_pid $hp

    est=$(sed -nE 's/.* established=([0-9]+) lost=([0-9]+).*/\1/p' "$d/load.out")
    lost=$(sed -nE 's/.* established=([0-9]+) lost=([0-9]+).*/\2/p' "$d/load.out")
    sent=$(sed -nE 's/.*heartbeats sent=([0-9]+) replies=([0-9]+).*/\1/p' "$d/load.out")
    repl=$(sed -nE 's/.*heartbeats sent=([0-9]+) replies=([0-9]+).*/\2/p' "$d/load.out")
    upms=$(sed -nE 's/.*all sessions established after ([0-9]+) ms.*/\1/p' "$d/load.out" |
        head -n 1)
    jfail=$(sed -nE 's/.* join_failures=([0-9]+).*/\1/p' "$d/load.out")
    rtt=$(sed -nE 's/.*round trip ms \(steady\): p50=([0-9.]+) p90=[0-9.]+ /\1 /p' "$d/load.out" |
        sed -nE 's/^([0-9.]+) p99=([0-9.]+) max=([0-9.]+).*/\1\/\2\/\3/p')
    # heartbeats answered in the window (the two marks): head CPU per heartbeat from those
    hbw=$(sed -nE 's/^agent_load: mark .* replies=([0-9]+).*/\1/p' "$d/load.out" |
        awk 'NR == 1 {a = $1} NR == 2 {b = $1} END {print (NR >= 2 ? b - a : 0)}')
    hbs=$(awk -v a="$t2" -v b="$t3" -v h="$hbw" 'BEGIN {printf "%.0f", h / (b - a)}')
    awk -v n="$n" -v conns="$conns" -v alive="$alive" -v est="${est:-0}" -v cpu="$cpu" \
        -v idle="$idle_cpu" -v ri="$rss_idle" -v r="$rss" -v hwm="$hwm" -v lcpu="$lcpu" \
        -v sent="${sent:-0}" -v repl="${repl:-0}" -v rtt="${rtt:--}" -v upms="${upms:--}" \
        -v jfail="${jfail:-0}" -v hq="$hq" -v lq="$lq" -v la="$load1" -v hbs="$hbs" 'BEGIN {
        uh = "-"
        if (hbs > 0) uh = sprintf("%.0f", (cpu - idle) * 1e4 / hbs)
        printf "%6d %6d %6d %6d %6s %5d %6.1f %5.1f %7.3f %6d %6s %8.1f %6.1f %7.1f %7.1f ", n,
            est, alive, conns, upms, jfail, cpu, idle, (cpu - idle) / n, hbs, uh, ri / 1024,
            r / 1024, hwm / 1024, (r - ri) / n
        printf "%8d/%-8d %-20s %5.1f %5d %5d %s\n", repl, sent, rtt, lcpu, hq, lq, la }'
    ok=0
    [ "$up" = yes ] ||
        { echo "  FAIL: not every session was established (see $d/load.*)" >&2; ok=1; }
    [ "${est:-0}" -eq "$n" ] || { echo "  FAIL: established ${est:-0} of $n" >&2; ok=1; }
    [ "${lost:-1}" -eq 0 ] || { echo "  FAIL: ${lost:-?} sessions lost" >&2; ok=1; }
    [ "$alive" -eq "$n" ] || { echo "  FAIL: hvctl nodes lists $alive alive, want $n" >&2; ok=1; }
    [ $lrc -eq 0 ] ||
        { echo "  FAIL: agent_load exited $lrc: $(tail -n 3 "$d/load.err")" >&2; ok=1; }
    return $ok
}

need_bins
nice=""
if [ -n "${NICE:-}" ]; then
    case $NICE in -[0-9]*|[0-9]*) nice="nice -n $NICE" ;; *) die "NICE '$NICE' is not a number" ;; esac
    $nice true 2>/dev/null || die "cannot run under nice -n $NICE (a negative value needs root)"
fi
[ $# -gt 0 ] || set -- 100
for n in "$@"; do
    case $n in ''|*[!0-9]*) die "agent count '$n' is not a number" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 10000 ] || die "agent count $n: expected 1..10000"
done
echo "head_load: hvhead with N simulated agents, heartbeat 1 s, lease 10 s; steady window" \
    "${WINDOW} s; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg);" \
    "${nice:-default priority}; join window $JOINS"
echo "cpu% = share of one core over the window; rss in MiB; kib/agt = (rss - idle rss) / N;"
echo "cpu/agt = (cpu% - idle cpu%) / N; replies/sent = heartbeats over the whole agent_load run;"
echo "up.ms = start of agent_load to the last session up (ramp included); jfail = Join attempts"
echo "that failed and were retried; load% = agent_load's own CPU (it shares the machine)"
echo "rtt = heartbeat round trip p50/p99/max ms seen by agent_load after every session was up"
echo "hb/s = heartbeats answered a second in the window; us/hb = head CPU per heartbeat in us"
echo "((cpu% - idle%) of one core / hb/s); hwait% and"
echo "lwait% = time the head's and agent_load's threads were runnable but waiting for a CPU, in %"
echo "of the window (summed over threads: above 100 means more than one thread waited); loadavg"
echo "= the 1-minute load average at the window's start and end"
printf "%6s %6s %6s %6s %6s %5s %6s %5s %7s %6s %6s %8s %6s %7s %7s %17s %-20s %5s %5s %5s %s\n" \
    agents estab alive conns up.ms jfail cpu% idle% cpu/agt hb/s us/hb rss.idle rss rss.hwm kib/agt \
    replies/sent rtt load% hwait% lwait% loadavg
status=0
for n in "$@"; do
    run_one "$n" || status=1
done
exit $status
