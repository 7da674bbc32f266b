#!/usr/bin/env bash
# bench_torch.sh: hv.torch against torch.distributed (Gloo), and the binding's cost per call.
#
#   tests/perf/bench_torch.sh [--build DIR] [--sizes 4K,1M,64M] [--runs R] [--reps N]
#
# 1. bench_torch.py: 2 ranks, each with hv and a Gloo process group, time hvd.allreduce_ (in
#    place, Sum) against dist.all_reduce (in place, SUM), and hvd.allreduce (a new tensor,
#    Average: Horovod's default) against the same written with torch.distributed (clone,
#    all_reduce, div_), on the same float32 tensors, interleaved; "x" = Gloo time / hv time
#    (above 1: hv faster), x(avg) for the out-of-place pair. Then, in the same processes, the
#    named blocking call hvd.allreduce_(t, op=hvd.Sum, name=...) and an async one waited at once
#    (hvd.synchronize(hvd.allreduce_async_(...))) against the unnamed hvd.allreduce_, in blocks
#    of consecutive calls of one kind, the kinds' blocks alternating (mean per call in a block,
#    median over blocks; bench_torch.py named_calls says why not single calls): "named/unnamed"
#    and "sync/unnamed" = their time / the unnamed call's (issue 27: at most 1.2).
# 2. The binding's cost: hvd.allreduce_ at 4 KiB against libhv's C benchmark (bench_allreduce)
#    at 4 KiB, 2 ranks and 1 rank (1 rank: no peer, so the difference is the binding alone);
#    and, less exposed to the machine's drift, the same in one process (bench_torch.py
#    binding_cost: the Python call, the bare ctypes call and a refused ctypes call, interleaved).
# With --reps N each measurement is repeated N times and the median reported. Needs
# /usr/bin/python3 with python3-torch and a build with build/python (cmake --build build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="$repo/build"
sizes="4K,1M,64M"
runs=7
reps=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
    *) echo "bench_torch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
[ -d "$build/python/hv" ] || { echo "missing $build/python/hv (cmake --build $build)" >&2; exit 2; }
[ -x "$build/bin/bench_allreduce" ] || { echo "missing $build/bin/bench_allreduce" >&2; exit 2; }
"$py" -c "import torch" 2>/dev/null || { echo "$py cannot import torch (install python3-torch)" >&2; exit 2; }
out=$(mktemp -d /tmp/hv-bench-torch.XXXXXX)
trap 'rm -rf "$out"' EXIT

export HV_LOG_LEVEL=3
for rep in $(seq 1 "$reps"); do
  "$py" "$here/bench_torch.py" --launch 2 --pypath "$build/python" --sizes "$sizes" \
    --runs "$runs" | sed "s/^ROW /ROW2 /" >> "$out/rows"
  "$build/bin/bench_allreduce" --launch 2 --sizes 4K --runs "$runs" | sed "s/^ROW /ROWC2 /" >> "$out/rows"
  "$py" "$here/bench_torch.py" --launch 1 --pypath "$build/python" --sizes 4K \
    --runs "$runs" | sed "s/^ROW /ROW1 /" >> "$out/rows"
  "$build/bin/bench_allreduce" --launch 1 --sizes 4K --runs "$runs" | sed "s/^ROW /ROWC1 /" >> "$out/rows"
done

# Medians over repetitions, then the table.
awk '
function median(key,   n, i, j, t, a) {
  n = split(vals[key], a, " ");
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function human(b) { return b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB" }
{ key = $1 " " $2 " " $3; vals[key] = vals[key] " " $4; if ($1 == "ROW2") sz[$3] = 1 }
END {
  printf "2 ranks, float32, median us per call (x = gloo / hv)\n";
  printf "%-9s %12s %12s %12s %12s %8s %8s\n", "size", "hv", "gloo", "hv-avg", "gloo-avg", "x", "x(avg)";
  ns = 0; for (s in sz) list[++ns] = s + 0;
  for (i = 1; i <= ns; i++) for (j = i + 1; j <= ns; j++) if (list[j] < list[i]) { t = list[i]; list[i] = list[j]; list[j] = t }
  for (i = 1; i <= ns; i++) {
    s = list[i]; h = median("ROW2 hv " s); a = median("ROW2 hv-avg " s); g = median("ROW2 gloo " s);
    ga = median("ROW2 gloo-avg " s);
    printf "%-9s %12.2f %12.2f %12.2f %12.2f %7.2fx %7.2fx\n", human(s), h, g, a, ga, g / h, ga / a
  }
  printf "named and async-waited against unnamed (hvd.allreduce_, in place, Sum; blocks of one kind alternating), median us per call\n";
  printf "%-9s %12s %12s %12s %14s %13s\n", "size", "unnamed", "named", "async+wait", "named/unnamed", "sync/unnamed";
  for (i = 1; i <= ns; i++) {
    s = list[i]; h = median("ROW2 nm-unnamed " s); nm = median("ROW2 nm-named " s); sy = median("ROW2 nm-sync " s);
    printf "%-9s %12.2f %12.2f %12.2f %13.2fx %12.2fx\n", human(s), h, nm, sy, nm / h, sy / h
  }
  c2 = median("ROWC2 allreduce 4096"); p2 = median("ROW2 hv 4096");
  c1 = median("ROWC1 allreduce 4096"); p1 = median("ROW1 hv 4096");
  printf "binding cost at 4 KiB (hvd.allreduce_ - C hv_allreduce, us per call):\n";
  printf "  2 ranks: python %.2f  C %.2f  -> %+.2f us\n", p2, c2, p2 - c2;
  printf "  1 rank:  python %.2f  C %.2f  -> %+.2f us\n", p1, c1, p1 - c1;
  py = median("ROW1 cost-py 4096"); ct = median("ROW1 cost-ctypes 4096"); ffi = median("ROW1 cost-ffi 4096");
  printf "  in one process, 1 rank: hvd.allreduce_ %.2f, hv_allreduce via ctypes %.2f, a refused\n", py, ct;
  printf "  ctypes call %.2f -> binding = %.2f - %.2f + %.2f = %.2f us per call\n", ffi, py, ct, ffi, py - ct + ffi;
}' "$out/rows"
