#!/usr/bin/env bash
# fleetsim.sh: the fleet policy against first come, first served and a static partition in the
# simulator (tests/perf/fleetsim.c), one command: the main table over --seeds seeds, then how the
# result moves with the workload (the share of elastic jobs, the load, how well the jobs scale)
# and with quotas, each line the fleet policy's average JCT against fcfs (median / worst seed),
# the bound no policy reaches (every job alone at its best size, against fcfs), its utilization
# while some job wants more, its preemptions and the top-priority jobs started in time.
#
#   tests/perf/fleetsim.sh [--seeds 10] [--build DIR] [--quick] [-- FLEETSIM OPTIONS]
#
# --quick: the main table only. Options after -- go to every fleetsim run (e.g. --jobs 40).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRC/build SEEDS=10 QUICK=0
while [ $# -gt 0 ]; do
    case $1 in
    --seeds) SEEDS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --) shift; break ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
    esac
done
SIM=$BUILD/bin/fleetsim
[ -x "$SIM" ] || { echo "fleetsim.sh: build first (cmake --build $BUILD --target fleetsim)" >&2; exit 2; }
"$SIM" --seeds "$SEEDS" "$@"
[ "$QUICK" = 1 ] && exit 0
echo
echo "How it moves (fleet against fcfs: average JCT, median / worst seed; fleet's utilization"
echo "while wanted, median / worst), $SEEDS seeds each, every other setting as above:"
echo
echo "| setting | avg JCT vs fcfs | bound (each job alone) vs fcfs | fleet utilization while wanted | fleet preemptions | top-priority started within interval + 1 s |"
echo "|---|---|---|---|---|---|"
row() { # LABEL FLEETSIM-OPTIONS...
    local label=$1; shift
    "$SIM" --seeds "$SEEDS" --policies "fcfs fleet" "$@" |
        awk -F'|' -v l="$label" '$2 ~ /^ fleet / { f = sprintf("|%s|", $12); u = $6; p = $10; h = $13 }
            $2 ~ /^ \(each/ { b = $12 }
            END { printf "| %s %s%s|%s|%s|%s|\n", l, f, b, u, p, h }'
}
row "the earlier workload: 24 jobs, 30-1500 steps" "$@" --jobs 24 --steps 30:1500
row "lengths 10-30000 steps (heavier tail)" "$@" --steps 10:30000
for e in 0.4 0.6 0.8 1.0; do row "elastic share $e" "$@" --elastic "$e"; done
for l in 0.6 0.8 1.2 1.5; do row "load $l" "$@" --load "$l"; done
for ov in 2:1 8:8 20:5; do row "step overhead $ov ms (fixed : per extra worker)" "$@" --overhead-ms "$ov"; done
row "quotas: the static partition, borrowing unlimited" "$@" --fleet-quota partition
for iv in 1000 5000; do row "resize interval $iv ms" "$@" --interval-ms "$iv"; done
row "measurement noise 20%" "$@" --noise 0.2
row "every low-priority job --preemptible" "$@" --preemptible 1
row "no low-priority job --preemptible" "$@" --preemptible 0
for st in 180000 600000; do row "starvation bound $st ms" "$@" --starve-ms "$st"; done
