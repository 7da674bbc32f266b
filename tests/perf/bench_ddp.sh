#!/usr/bin/env bash
# bench_ddp.sh: a training step with hv.torch.parallel.DistributedDataParallel against torch's
# DistributedDataParallel on Gloo, and hv.torch.DistributedOptimizer beside them, 2 ranks on this
# machine, side by side in the same processes (bench_ddp.py says what a step is).
#
#   tests/perf/bench_ddp.sh [--build DIR] [--steps S] [--reps R] [--layers L] [--width W]
#
# Prints every repetition's ms per step, then the median and the worst of each kind and
# x = torch DDP time / hv time (above 1: hv faster). Fails when the sides' parameters differ.
# Needs /usr/bin/python3 with python3-torch and a build with build/python.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="$repo/build"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --steps|--reps|--layers|--width) args+=("$1" "$2"); shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
    *) echo "bench_ddp.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
[ -d "$build/python/hv" ] || { echo "missing $build/python/hv (cmake --build $build)" >&2; exit 2; }
"$py" -c "import torch" 2>/dev/null || { echo "SKIP: $py cannot import torch" >&2; exit 77; }
out=$(mktemp /tmp/hv-bench-ddp.XXXXXX)
trap 'rm -f "$out"' EXIT
export HV_LOG_LEVEL=3
"$py" "$here/bench_ddp.py" --launch 2 --pypath "$build/python" "${args[@]}" | tee "$out"
awk '
  $1 == "ROW" { v[$2] = v[$2] " " $4 }
  function stats(k,   a, n, i, j, t) {
    n = split(v[k], a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    med[k] = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    worst[k] = a[n]
  }
  END {
    for (k in v) stats(k)
    for (k in v) printf "%-6s median %.1f ms  worst %.1f ms\n", k, med[k], worst[k]
    printf "x(hvddp) = ddp / hvddp = %.2f (medians), %.2f (worst)\n", med["ddp"] / med["hvddp"], worst["ddp"] / worst["hvddp"]
    printf "x(hvopt) = ddp / hvopt = %.2f (medians), %.2f (worst)\n", med["ddp"] / med["hvopt"], worst["ddp"] / worst["hvopt"]
  }' "$out"
grep -q "^CHECK" "$out" || { echo "bench_ddp.sh: no CHECK line (a rank failed)" >&2; exit 1; }
