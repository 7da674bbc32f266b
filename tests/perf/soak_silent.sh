#!/usr/bin/env bash
# soak_silent.sh: no false suspicion from the data plane's liveness detector under load, through
# the real binaries. Needs root (ip netns).
#
#   tests/perf/soak_silent.sh [--minutes 10] [--workers 3] [--hogs 10] [--compute-ms 2000]
#                             [--env K=V]... [--bin DIR] [--out FILE]
#
# The head and --workers one-slot agents each in their own network namespace on a bridge
# (tests/netns_lib.sh; the head's defaults for heartbeat, lease and grace), an elastic job of
# --workers workers (tests/perf/bench_elastic: every step an allreduce of a 1 MiB model and a
# commit, then --compute-ms of busy compute on the training thread, a long step that calls
# nothing of libhv), and --hogs busy loops (bounded by the run) saturating every core beside
# them, for --minutes. Nothing fails on purpose, so every suspicion is a false one. Prints what
# the head saw (node.suspect events, rounds after the first, the detector's one-sided reports
# of a silent neighbour) and the load average every 10 s (min, median, max); exits 1 on any
# suspicion or extra round. --out FILE keeps the summary.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$SRC/build/bin
MINUTES=10
WORKERS=3
HOGS=10
COMPUTE_MS=2000
OUT=""
ENVS=()
while [ $# -gt 0 ]; do
    case $1 in
    --minutes) MINUTES=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --hogs) HOGS=$2; shift 2 ;;
    --compute-ms) COMPUTE_MS=$2; shift 2 ;;
    --env) ENVS+=(--env "$2"); shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes M] [--workers N] [--hogs K] [--compute-ms MS] [--env K=V]... [--bin DIR] [--out FILE]" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/hvhead" ] && [ -x "$BIN/hvagent" ] && [ -x "$BIN/bench_elastic" ] || { echo "build first: $BIN" >&2; exit 2; }
BENCH_TMP_PREFIX=hvsoak
. "$(dirname "$0")/bench_lib.sh"
. "$SRC/tests/netns_lib.sh"
netns_bench hvk$$ 10.205.0 "$WORKERS"
D=$TMP
netns_cluster "$D" $P 10.205.0 "$WORKERS" || exit 1
SUB_OPTS=("${ENVS[@]}")
bench_job "$WORKERS" 86400 --compute-ms "$COMPUTE_MS"
END=$(( $(now_ms) + MINUTES * 60000 ))
for k in $(seq 1 "$HOGS"); do
    # A busy loop that ends by itself at the end of the run (and with the script's cleanup).
    timeout "$((MINUTES * 60 + 5))" bash -c 'while :; do :; done' "$TMP/hog$k" &
    PIDS="$PIDS $!"
    disown $!
done
: >"$D/load"
while [ "$(now_ms)" -lt "$END" ]; do
    cut -d' ' -f1 /proc/loadavg >>"$D/load"
    sleep 10
done
ip netns exec ${P}h "$BIN/hvctl" --head $H events --json --limit 100000 >"$D/events.json"
/usr/bin/python3 - "$D" "$MINUTES" "$WORKERS" "$HOGS" "$COMPUTE_MS" "$(nproc)" "${ENVS[*]:-}" <<'PY' | tee "${OUT:-/dev/null}"
import json, statistics, sys
D, minutes, workers, hogs, compute, ncpu, env = sys.argv[1:8]
ev = json.load(open(D + "/events.json"))["events"]
sus = [e for e in ev if e["kind"] == "node.suspect"]
rounds = [e for e in ev if e["kind"] == "round.close"]
reports = sum(1 for l in open(D + "/head.err") if "HV-RING-SILENT" in l)
load = [float(x) for x in open(D + "/load") if x.strip()]
ok = not sus and len(rounds) == 1
print("soak %s min: %s workers (one-slot agents, each in its own namespace), %s hogs, compute "
      "step %s ms, %s cores%s" % (minutes, workers, hogs, compute, ncpu,
                                  ", --env " + env if env else ""))
print("  load average (1 min, every 10 s): min %.1f, median %.1f, max %.1f"
      % (min(load), statistics.median(load), max(load)))
print("  node.suspect events: %d; rounds: %d (1 = the first only); one-sided silence reports: %d"
      % (len(sus), len(rounds), reports))
for e in sus + rounds[1:]:
    print("  ", e["kind"], e["message"])
print("  result: %s" % ("PASS: no false suspicion" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
