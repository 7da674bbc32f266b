#!/usr/bin/env bash
# bench_torch_fmnist.sh: the epoch time of examples/python/train_fmnist.py (hv.torch: the
# DistributedOptimizer and the elastic state committed after every step) against the same
# training with DistributedDataParallel on Gloo (tests/perf/bench_torch_fmnist.py), 2 ranks on
# this machine, one torch thread each, side by side in one run (hv, DDP, hv, DDP, ...).
#
#   tests/perf/bench_torch_fmnist.sh [--build DIR] [--runs R] [--train-limit N] [--test-limit N]
#                                    [--base DIR]
#
# Both are started by a local launcher (hv: HV_RDZV_DIR, no head; DDP: MASTER_ADDR/PORT), so the
# difference is the library, not hvagent. An epoch: N training samples in steps of 32 per rank
# (the default 20000: a third of the data set), then each rank evaluates its share of the test
# set. Prints each run's epoch seconds and accuracy, the medians and x = DDP time / hv time
# (above 1: hv faster), and the pairs' ratios (DDP / hv of each run's two epochs, taken back to
# back): their median and the worst. --base DIR adds a third kind, "base": the same example with the hv
# package of DIR/python (another build or checkout, e.g. before a change), in the same rotation,
# and prints base's median and base time / hv time. Needs /usr/bin/python3 with python3-torch
# and build/python.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="$repo/build"
runs=3
train_limit=20000
test_limit=2000
base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --train-limit) train_limit="$2"; shift 2 ;;
    --test-limit) test_limit="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
    *) echo "bench_torch_fmnist.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
[ -d "$build/python/hv" ] || { echo "missing $build/python/hv (cmake --build $build)" >&2; exit 2; }
[ -z "$base" ] || [ -d "$base/python/hv" ] || { echo "missing $base/python/hv" >&2; exit 2; }
"$py" -c "import torch" 2>/dev/null || { echo "$py cannot import torch (install python3-torch)" >&2; exit 2; }
out=$(mktemp -d /tmp/hv-bench-fmnist.XXXXXX)
trap 'rm -rf "$out"' EXIT
args="--epochs 1 --train-limit $train_limit --test-limit $test_limit --threads 1"
export HV_LOG_LEVEL=3

# run_hv [LABEL PYTHONPATH]: one epoch of the example on 2 ranks (default: hv, this build)
# shellcheck disable=SC2086 # args: several options
run_hv() {
  local label=${1:-hv} pp=${2:-$build/python}
  local d; d=$(mktemp -d "$out/rdzv.XXXXXX")
  for r in 1 0; do
    PYTHONPATH=$pp HV_RDZV_DIR=$d HV_RANK=$r HV_SIZE=2 HV_LOCAL_RANK=$r HV_LOCAL_SIZE=2 \
      "$py" "$repo/examples/python/train_fmnist.py" $args >"$out/$label.$r" 2>"$out/$label.$r.err" &
  done
  wait
  sed -n "s/^train_fmnist: epoch=0 .*accuracy=\([0-9.]*\) seconds=\([0-9.]*\)\$/$label \2 \1/p" "$out/$label.0"
}

# shellcheck disable=SC2086
run_ddp() {
  local port; port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 1 0; do
    PYTHONPATH=$build/python MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 \
      "$py" "$here/bench_torch_fmnist.py" $args >"$out/ddp.$r" 2>"$out/ddp.$r.err" &
  done
  wait
  sed -n 's/^ddp_gloo: epoch=0 .*accuracy=\([0-9.]*\) seconds=\([0-9.]*\)$/ddp \2 \1/p' "$out/ddp.0"
}

run_base() { [ -z "$base" ] || run_hv base "$base/python"; }
for i in $(seq 1 "$runs"); do
  case $((i % 3)) in
    1) run_hv; run_ddp; run_base ;;
    2) run_ddp; run_base; run_hv ;;
    0) run_base; run_hv; run_ddp ;;
  esac
done | tee "$out/rows"
[ "$(grep -c '^hv ' "$out/rows")" -eq "$runs" ] || { echo "a hv run failed:" >&2; cat "$out"/hv.*.err >&2; exit 1; }
[ "$(grep -c '^ddp ' "$out/rows")" -eq "$runs" ] || { echo "a DDP run failed:" >&2; cat "$out"/ddp.*.err >&2; exit 1; }
[ -z "$base" ] || [ "$(grep -c '^base ' "$out/rows")" -eq "$runs" ] || { echo "a base run failed:" >&2; cat "$out"/base.*.err >&2; exit 1; }
awk -v n="$train_limit" '
function median(k,   c, i, j, t, a) {
  c = split(v[k], a, " ");
  for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
{ v[$1] = v[$1] " " $2; k[$1]++; run[$1, k[$1]] = $2 }
END {
  h = median("hv"); d = median("ddp");
  printf "2 ranks, %d training samples, median epoch seconds: hv.torch %.2f  DDP-Gloo %.2f  x = %.2f\n", n, h, d, d / h
  # Run i ran one epoch of each kind back to back: its pair ratio DDP / hv.
  for (i = 1; i <= k["hv"]; i++) { r = run["ddp", i] / run["hv", i]; v["pair"] = v["pair"] " " r; if (i == 1 || r < w) w = r }
  printf "pairs (DDP / hv per run): median %.2f, worst %.2f over %d runs\n", median("pair"), w, k["hv"]
  if ("base" in v) { b = median("base"); printf "base (--base) %.2f s: base / hv = %.2f, x(base) = DDP / base = %.2f\n", b, b / h, d / b }
}' "$out/rows"
