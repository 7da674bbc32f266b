#!/usr/bin/env bash
# bench_allreduce.sh: libhv's allreduce against OpenMPI, side by side, in one command.
#
#   tests/perf/bench_allreduce.sh [--quick] [--bin DIR] [--ranks "2 4"] [--sizes 4K,...]
#                                 [--reps N] [--resnet FILE] [--cluster]
#
# For each rank count it runs, --reps times and interleaved (so that load drifting on the machine
# hits every implementation alike):
#   hv-tcp   bench_allreduce (libhv, HV_SHM=0: TCP between all ranks)
#   hv-shm   bench_allreduce (libhv, same-host neighbours through shared memory)
#   mpi-tcp  bench_mpi under mpirun forced to TCP over loopback (ob1, btl tcp,self)
#   mpi-def  bench_mpi under mpirun with OpenMPI's defaults (shared memory)
# hv runs under its own forking launcher; with --cluster through the real binaries (a local
# hvhead and one hvagent, ranks submitted with hvsubmit); or under the command in
# HV_BENCH_LAUNCH, e.g. "hvsubmit --head 127.0.0.1:7000 -q -np {n}" ({n}: ranks; the HV_SHM
# setting is passed as -e HV_SHM=...).
# It prints the median time and busbw (nccl-tests definition) of every row with ratios
# "x" = peer time / hv time (above 1: hv is faster): hv-tcp against mpi-tcp, hv-shm against
# mpi-def. Rows: in-place float32 sum per size, and one ResNet-50 step (161 gradients; hv: named
# async tensors submitted in reverse order and fused; MPI: one MPI_Allreduce per tensor).
# Needs: bench_allreduce and bench_mpi (built when MPI is found: deploy/install-deps.sh --bench).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin="${HV_BIN_DIR:-$repo/build/bin}"
ranks="2 4"
sizes="4K,64K,1M,16M,64M,256M"
reps=3
cluster=0
# the 161 float32 parameter counts of torchvision's ResNet-50 (a copy of shared/data's file)
resnet="$repo/tests/perf/data/resnet50_grad_counts.txt"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) sizes="4K,1M,16M,64M"; ranks="2"; reps=1; shift ;;
    --bin) bin="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --resnet) resnet="$2"; shift 2 ;;
    --cluster) cluster=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "bench_allreduce.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

hvb="$bin/bench_allreduce"
mpib="$bin/bench_mpi"
[ -x "$hvb" ] || { echo "missing $hvb (build the bench_allreduce target)" >&2; exit 2; }
have_mpi=1
if [ ! -x "$mpib" ] || ! command -v mpirun > /dev/null; then
  echo "note: no bench_mpi or mpirun: hv only (install with deploy/install-deps.sh --bench)" >&2
  have_mpi=0
fi
rn_args=()
[ -f "$resnet" ] && rn_args=(--resnet "$resnet")

out=$(mktemp -d /tmp/hv-bench-out.XXXXXX)
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT

if [ "$cluster" = 1 ]; then
  # A throw-away cluster: one head and one agent with as many slots as the largest run.
  max=0; for n in $ranks; do [ "$n" -gt "$max" ] && max=$n; done
  cat > "$out/head.yaml" <<YAML
cluster_name: bench
listen: 127.0.0.1:0
data_dir: $out/data
token: bench-token
log_level: warn
YAML
  "$bin/hvhead" start --config "$out/head.yaml" > "$out/head.out" 2> "$out/head.err" &
  pids="$pids $!"
  for _ in $(seq 1 100); do grep -q 'listening on' "$out/head.out" && break; sleep 0.1; done
  head_addr=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$out/head.out" | tail -n 1)
  [ -n "$head_addr" ] || { echo "hvhead did not start" >&2; cat "$out/head.err" >&2; exit 1; }
  "$bin/hvagent" join "$head_addr" --token bench-token --name bench-node --slots "$max" \
    --work-dir "$out/agent" > "$out/agent.out" 2> "$out/agent.err" &
  pids="$pids $!"
  for _ in $(seq 1 150); do grep -q 'joined' "$out/agent.out" && break; sleep 0.1; done
  HV_BENCH_LAUNCH="$bin/hvsubmit --head $head_addr -q -np {n}"
fi

run_hv() { # n shm(0|1)
  local n=$1 shm=$2
  if [ -n "${HV_BENCH_LAUNCH:-}" ]; then
    ${HV_BENCH_LAUNCH//\{n\}/$n} -e "HV_SHM=$shm" "$hvb" --sizes "$sizes" --runs 3 "${rn_args[@]}"
  else
    HV_SHM=$shm "$hvb" --launch "$n" --sizes "$sizes" --runs 3 "${rn_args[@]}"
  fi
}

run_mpi() { # n mode
  local n=$1 mode=$2
  local mca=()
  [ "$mode" = tcp ] && mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  mpirun --allow-run-as-root --oversubscribe -np "$n" "${mca[@]}" \
    "$mpib" --sizes "$sizes" --runs 3 "${rn_args[@]}" 2> "$out/mpi.err"
}

for n in $ranks; do
  for rep in $(seq 1 "$reps"); do
    echo "ranks $n, repetition $rep/$reps ..." >&2
    run_hv "$n" 0 | grep -o 'ROW .*' | sed "s/^/hv-tcp $n /" >> "$out/rows" || {
      echo "hv benchmark (tcp) failed" >&2; exit 1; }
    run_hv "$n" 1 | grep -o 'ROW .*' | sed "s/^/hv-shm $n /" >> "$out/rows" || {
      echo "hv benchmark (shm) failed" >&2; exit 1; }
    if [ "$have_mpi" = 1 ]; then
      run_mpi "$n" tcp | grep -o 'ROW .*' | sed "s/^/mpi-tcp $n /" >> "$out/rows" || true
      run_mpi "$n" def | grep -o 'ROW .*' | sed "s/^/mpi-def $n /" >> "$out/rows" || true
    fi
  done
done

# rows: impl n ROW kind bytes time_us busbw  ->  medians per (impl, n, kind, bytes)
awk '
function median(list,   a, k, i, j, t) {
  k = split(list, a, " ");
  for (i = 2; i <= k; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2;
}
function human(b) {
  if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) " MiB";
  if (b >= 1024 && b % 1024 == 0) return (b / 1024) " KiB";
  return sprintf("%.1f MB", b / 1e6);
}
function fmt_t(us) { return us >= 10000 ? sprintf("%8.1f ms", us / 1000) : sprintf("%8.1f us", us) }
{
  key = $1 SUBSEP $2 SUBSEP $4 SUBSEP $5;
  t[key] = t[key] " " $6; bw[key] = bw[key] " " $7;
  if (!(($2 SUBSEP $4 SUBSEP $5) in seen)) { seen[$2 SUBSEP $4 SUBSEP $5] = 1; order[++no] = $2 SUBSEP $4 SUBSEP $5 }
}
END {
  last = "";
  split("hv-tcp mpi-tcp hv-shm mpi-def", impls, " ");
  for (i = 1; i <= no; i++) {
    split(order[i], p, SUBSEP); n = p[1]; kind = p[2]; bytes = p[3];
    if (n != last) {
      printf "\n%d ranks (busbw = bytes/time x 2(n-1)/n; x = peer time / hv time)\n", n;
      printf "%-14s | %-22s | %-22s %5s | %-22s | %-22s %5s\n", "row", "hv tcp", "OpenMPI tcp", "x",
        "hv shm", "OpenMPI default", "x";
      last = n;
    }
    row = kind == "resnet" ? "resnet50 step" : human(bytes);
    for (m = 1; m <= 4; m++) {
      k = impls[m] SUBSEP n SUBSEP kind SUBSEP bytes;
      if (k in t) { mt[m] = median(t[k]); mb[m] = median(bw[k]); cell[m] = sprintf("%s %6.3f GB/s", fmt_t(mt[m]), mb[m]) }
      else { mt[m] = 0; cell[m] = sprintf("%22s", "-") }
    }
    x1 = mt[1] > 0 && mt[2] > 0 ? sprintf("%5.2f", mt[2] / mt[1]) : "    -";
    x2 = mt[3] > 0 && mt[4] > 0 ? sprintf("%5.2f", mt[4] / mt[3]) : "    -";
    printf "%-14s | %s | %s %s | %s | %s %s\n", row, cell[1], cell[2], x1, cell[3], cell[4], x2;
  }
}' "$out/rows"
