#!/bin/sh
# tests/chaos/soak.sh: the long chaos soak, by hand. Runs tests/chaos/chaos.sh for many seeds in
# turn (the issue's profile by default: 8 epochs of 12000 samples, 15 ms steps, one fault every
# 2-4 s; a seed takes about 75 s), then prints a summary: seeds run, how many failed and why
# (the FAIL line of each), the faults drawn, and the median and worst run time. Each seed's whole
# output is kept in the --out directory, so a failure can be read and replayed
# (sh tests/chaos/chaos.sh --seed S).
#
#   tests/chaos/soak.sh [--seeds N] [--first S] [--build DIR] [--out DIR] [chaos.sh options]
#     --seeds N   how many seeds (default 10), from --first S (default 1)
#     --build DIR the build directory (default ./build); its bin/ and examples/ are used
#     --out DIR   where each seed's log and the summary go (default /tmp/hv-soak.XXXXXX)
set -u
N=10 FIRST=1 BUILD=build OUT="" EXTRA=""
while [ $# -gt 0 ]; do
    case "$1" in
    --seeds) N=$2; shift 2 ;;
    --first) FIRST=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) EXTRA="$EXTRA $1"; shift ;;
    esac
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "soak.sh: no build directory $BUILD" >&2; exit 66; }
[ -x "$BUILD/bin/hvhead" ] && [ -x "$BUILD/examples/elastic_train" ] \
    || { echo "soak.sh: $BUILD has no bin/hvhead or examples/elastic_train: build first" >&2; exit 66; }
export HV_BIN_DIR="$BUILD/bin" HV_EXAMPLES_DIR="$BUILD/examples" HV_SRC_DIR="$SRC"
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/hv-soak.XXXXXX)
mkdir -p "$OUT"
: >"$OUT/results"
s=$FIRST
while [ "$s" -lt $((FIRST + N)) ]; do
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    sh "$SRC/tests/chaos/chaos.sh" --seed "$s" $EXTRA >"$OUT/seed-$s.log" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    faults=$(grep -c ' fault=' "$OUT/seed-$s.log")
    if [ "$rc" -eq 0 ]; then
        cause="-"
    else
        cause=$(grep -m 1 '^chaos seed=.* FAILED: ' "$OUT/seed-$s.log" | sed 's/^chaos seed=[0-9]* FAILED: //')
        [ -n "$cause" ] || cause=$(grep -m 1 '^FAIL: ' "$OUT/seed-$s.log" | sed 's/^FAIL: //')
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$rc" "$secs" "$faults" "$cause" | tee -a "$OUT/results"
    s=$((s + 1))
done
{
    echo "chaos soak: seeds $FIRST..$((FIRST + N - 1))${EXTRA:+ (options:$EXTRA)}"
    awk -F '\t' '{ n++; f += ($2 != 0); faults += $4; t[n] = $3 }
        END {
            # insertion sort of the run times for the median
            for (i = 2; i <= n; i++) { v = t[i]; j = i - 1; while (j > 0 && t[j] > v) { t[j + 1] = t[j]; j-- } t[j + 1] = v }
            med = n % 2 ? t[(n + 1) / 2] : (t[n / 2] + t[n / 2 + 1]) / 2
            printf "seeds run: %d, failed: %d, faults: %d; run time median %.1f s, worst %.1f s\n", n, f, faults, med, t[n]
        }' "$OUT/results"
    awk -F '\t' '$2 != 0 { printf "  seed %s failed: %s\n", $1, $5 }' "$OUT/results"
    echo "logs: $OUT"
} | tee "$OUT/summary"
# Exit 0 only when every seed passed.
awk -F '\t' '$2 != 0 { bad = 1 } END { exit bad }' "$OUT/results"
