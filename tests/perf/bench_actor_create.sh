#!/usr/bin/env bash
# bench_actor_create.sh: how long an actor takes from its create to its first call served
# (issue 17 §4), for 1 actor and for N actors created back to back, across A agents.
#
#   tests/perf/bench_actor_create.sh [--quick] [--bin BUILD_DIR] [--n N] [--agents A]
#
# Starts a head and A agents on 127.0.0.1 (one-slot actors: each agent gets slots for its share
# of both rounds below, plus one each), then measures the same two things two ways, in one run:
#   from one C program (bench_actor_create): Actors.Create on one channel; right after each
#     create a thread looks the actor up by name (hv_actor_lookup: Actors.Get, again every
#     100 ms while the actor is pending or starting, then a connection) and calls it ("get").
#   through the CLI: `hvctl actor create --class counter --name NAME -- actor_counter`, and
#     right after it `actor_call @NAME get` (the same lookup) in the background; a time starts
#     before the hvctl process starts and ends when actor_call has printed the result, so both
#     processes' start-up (a gRPC channel each) are in it. `hvctl actors` alone is timed too.
# For each: 1 actor (create -> first call), then N created back to back: the median, p99 and
# max of create -> first call per actor, how long the N creates took, and the total (first
# create to the last actor's first call). The program is on the nodes (the agents' PATH has the
# examples folder): no upload, no artifact fetch. Defaults: N=100, A=4; --quick: N=20. Every
# wait is bounded (60 s a lookup, 120 s for a round of N through the CLI).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="${HV_BUILD_DIR:-$(cd "$here/../.." && pwd)/build}"
n=100
agents=4
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) n=20; shift ;;
    --bin) build="$2"; shift 2 ;;
    --n) n="$2"; shift 2 ;;
    --agents) agents="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
    *) echo "$(basename "$0"): unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$n$agents" in *[!0-9]*) echo "$(basename "$0"): --n and --agents take numbers" >&2; exit 2 ;; esac
[ "$n" -ge 1 ] && [ "$agents" -ge 1 ] || { echo "$(basename "$0"): --n and --agents must be at least 1" >&2; exit 2; }
BIN=$build/bin
EX=$build/examples
for b in "$BIN/hvhead" "$BIN/hvagent" "$BIN/hvctl" "$BIN/bench_actor_create" "$EX/actor_counter" \
    "$EX/actor_call"; do
    [ -x "$b" ] || { echo "missing $b (build first)" >&2; exit 2; }
done
BENCH_TMP_PREFIX=bench_actor_create
. "$here/bench_lib.sh"
now_ns() { date +%s%N; }
# The actors run in their own process groups under the agents' work dirs: kill the head and the
# agents first (nothing restarts them then), the actors next, then bench_lib's cleanup.
callers=""
finish() {
    exec 2>/dev/null # no job-control notices for the processes killed here
    for p in $PIDS $callers; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $(find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$TMP/agent-*" 2>/dev/null |
        cut -d/ -f3); do kill -KILL "$p" 2>/dev/null || true; done
    cleanup
}
trap finish EXIT

# The head (notice level: the per-actor lines would cost more than the work measured).
{
    echo "cluster_name: bench"
    echo "listen: 127.0.0.1:0"
    echo "data_dir: $TMP/data"
    echo "token: bench-token"
    echo "heartbeat_ms: 200"
    echo "lease_ms: 10000"
    echo "kill_grace_ms: 1000"
    echo "log_level: notice"
} >"$TMP/head.yaml"
export HV_TOKEN_FILE="$TMP/data/client.token" # hvctl's and actor_call's credential
"$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/head.out" 2>"$TMP/head.err" &
PIDS="$PIDS $!"
wait_for 10 grep -q 'listening on' "$TMP/head.out" ||
    { echo "the head did not start" >&2; cat "$TMP/head.err" >&2; exit 1; }
export HV_HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$TMP/head.out")
slots=$((2 * ((n + agents - 1) / agents + 1)))
for i in $(seq 1 "$agents"); do
    PATH="$EX:$PATH" "$BIN/hvagent" join "$HV_HEAD" --token bench-token --name "n$i" \
        --slots "$slots" --work-dir "$TMP/agent-n$i" >"$TMP/agent-n$i.out" 2>"$TMP/agent-n$i.err" &
    PIDS="$PIDS $!"
done
for i in $(seq 1 "$agents"); do
    wait_for 20 grep -q joined "$TMP/agent-n$i.out" ||
        { echo "agent n$i did not join" >&2; cat "$TMP/agent-n$i.err" >&2; exit 1; }
done

create() { # NAME: create a one-slot counter actor; the program is on the nodes' PATH
    "$BIN/hvctl" actor create --class counter --name "$1" -- actor_counter \
        >>"$TMP/create.out" 2>>"$TMP/create.err" ||
        { echo "hvctl actor create $1 failed: $(tail -n 1 "$TMP/create.err")" >&2; exit 1; }
}
first_call() { # NAME: call it by name until served; its end time into $TMP/done.NAME
    if "$EX/actor_call" "@$1" get --timeout 60000 >/dev/null 2>>"$TMP/call.err"; then
        now_ns >"$TMP/done.$1"
    fi
}

echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $agents agents, $slots slots each"

# From one C program.
echo "# from one C program (Actors.Create, hv_actor_lookup, a call)"
"$BIN/bench_actor_create" "$HV_HEAD" cone 1 actor_counter | sed 's/^1 actors: /1 actor:  /; s/; 1 creates took.*//'
"$BIN/bench_actor_create" "$HV_HEAD" c "$n" actor_counter

# Through the CLI. 1. One actor.
echo "# through the CLI (hvctl actor create; actor_call @NAME get)"
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; } # START END (ns)
t0=$(now_ns)
"$BIN/hvctl" actors >/dev/null # the CLI's own cost: a process, a channel, one read-only RPC
t1=$(now_ns)
create one
t2=$(now_ns)
first_call one
[ -s "$TMP/done.one" ] || { echo "the first call to actor 'one' failed: $(tail -n 2 "$TMP/call.err")" >&2; exit 1; }
printf '%-34s %s ms (hvctl actor create %s ms; hvctl actors alone %s ms)\n' \
    "1 actor: create -> first call" "$(ms "$t1" "$(cat "$TMP/done.one")")" "$(ms "$t1" "$t2")" \
    "$(ms "$t0" "$t1")"

# 2. N actors, created back to back; each one's caller starts right after its create.
: >"$TMP/created"
for i in $(seq 1 "$n"); do
    echo "b$i $(now_ns)" >>"$TMP/created"
    create "b$i"
    first_call "b$i" &
    callers="$callers $!"
done
t_created=$(now_ns)
deadline=$(($(date +%s) + 120))
for p in $callers; do
    while kill -0 "$p" 2>/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || { echo "step 2 ran past 120 s" >&2; exit 1; }
        sleep 0.1
    done
done
served=0
: >"$TMP/lat"
while read -r name start; do
    [ -s "$TMP/done.$name" ] || continue
    served=$((served + 1))
    echo "$start $(cat "$TMP/done.$name")" >>"$TMP/lat"
done <"$TMP/created"
[ "$served" -eq "$n" ] ||
    { echo "only $served of $n actors served a first call: $(tail -n 3 "$TMP/call.err")" >&2; exit 1; }
first=$(head -n 1 "$TMP/created" | cut -d' ' -f2)
awk '{ printf "%.3f\n", ($2 - $1) / 1e6 }' "$TMP/lat" | sort -n >"$TMP/lat.sorted"
last=$(cut -d' ' -f2 "$TMP/lat" | sort -n | tail -n 1)
awk -v n="$n" -v first="$first" -v created="$t_created" -v last="$last" '
    { d[NR] = $1 }
    END {
        m = NR
        med = m % 2 ? d[(m + 1) / 2] : (d[m / 2] + d[m / 2 + 1]) / 2
        p = int(0.99 * m + 0.999999); if (p < 1) p = 1; if (p > m) p = m
        printf "%-34s median %.1f ms, p99 %.1f ms, max %.1f ms\n", n " actors: create -> first call", med, d[p], d[m]
        printf "%-34s %.1f ms (%.1f ms per create)\n", n " creates, back to back", (created - first) / 1e6, (created - first) / 1e6 / n
        printf "%-34s %.1f ms\n", n " actors: first create -> all served", (last - first) / 1e6
    }' "$TMP/lat.sorted"
# Where the time goes: the head's own view, create stored -> alive (the agent reported the
# actor's address), from each actor's created_ms and started_ms.
"$BIN/hvctl" actors --json >"$TMP/actors.json"
/usr/bin/python3 - "$TMP/actors.json" <<'PY'
import json, sys
acts = json.load(open(sys.argv[1]))
for label, pick in (("C, 1 actor", lambda a: a["name"] == "cone1"),
                    ("C, N actors", lambda a: a["name"][:1] == "c" and a["name"] != "cone1"),
                    ("CLI, 1 actor", lambda a: a["name"] == "one"),
                    ("CLI, N actors", lambda a: a["name"][:1] == "b")):
    d = sorted(a["started_ms"] - a["created_ms"] for a in acts if pick(a) and a["started_ms"])
    if d:
        print("# head: create -> alive (address reported), %s: median %.0f ms, max %d ms"
              % (label, (d[(len(d) - 1) // 2] + d[len(d) // 2]) / 2, d[-1]))
PY
placed=$("$BIN/hvctl" actors --json 2>/dev/null | grep -o '"node": *"n[0-9]*"' | sort | uniq -c |
    awk '{ printf "%s%s %s", sep, $3, $1; sep = ", " }' | tr -d '"' || true)
echo "# actors per node: $placed; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
