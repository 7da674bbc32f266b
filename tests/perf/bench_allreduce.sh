#!/usr/bin/env bash
# bench_allreduce.sh: libhv's allreduce against OpenMPI, side by side, in one command.
#
#   tests/perf/bench_allreduce.sh [--quick] [--bin DIR] [--ranks "2 4"] [--sizes 4K,...]
#                                 [--reps N] [--resnet FILE] [--cluster]
#
# For each rank count, repetition and row (a size, or the ResNet-50 step) it runs, back to back:
#   hv-tcp   bench_allreduce (libhv, HV_SHM=0: TCP between all ranks)
#   hv-shm   bench_allreduce (libhv, same-host neighbours through shared memory)
#   mpi-tcp  bench_mpi under mpirun forced to TCP over loopback (ob1, btl tcp,self)
#   mpi-def  bench_mpi under mpirun with OpenMPI's defaults (shared memory)
# hv runs under its own forking launcher; with --cluster through the real binaries (a local
# hvhead and one hvagent, ranks submitted with hvsubmit); or under the command in
# HV_BENCH_LAUNCH, e.g. "hvsubmit --head 127.0.0.1:7000 -q -np {n}" ({n}: ranks; the HV_SHM
# setting is passed as -e HV_SHM=...).
# Each row is measured in its own processes, hv and its peer right after each other, and the
# order alternates between repetitions: these shared VMs drift, and loopback TCP in particular
# has spells in which every process's socket copies run ~3x slower (seen with both hv and
# OpenMPI), so only measurements taken together are compared. It prints the median time and
# busbw (nccl-tests definition) of every row and "x" = the median over repetitions of
# peer time / hv time (above 1: hv is faster): hv-tcp against mpi-tcp, hv-shm against mpi-def.
# Rows: in-place float32 sum per size, and one ResNet-50 step (161 gradients; hv: named async
# tensors submitted in reverse order and fused; MPI: one MPI_Allreduce per tensor).
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
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
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
  export HV_TOKEN_FILE="$out/data/client.token" # the CLIs' credential, written by the head
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

run_hv() { # n shm(0|1) row-args...
  local n=$1 shm=$2
  shift 2
  if [ -n "${HV_BENCH_LAUNCH:-}" ]; then
    ${HV_BENCH_LAUNCH//\{n\}/$n} -e "HV_SHM=$shm" "$hvb" --runs 3 "$@"
  else
    HV_SHM=$shm "$hvb" --launch "$n" --runs 3 "$@"
  fi
}

run_mpi() { # n mode row-args...
  local n=$1 mode=$2
  shift 2
  local mca=()
  [ "$mode" = tcp ] && mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  mpirun --allow-run-as-root --oversubscribe -np "$n" "${mca[@]}" \
    "$mpib" --runs 3 "$@" 2> "$out/mpi.err"
}

# One measurement: impl n rep row-args... -> "impl n rep ROW ..." lines in $out/rows.
measure() {
  local impl=$1 n=$2 rep=$3
  shift 3
  case "$impl" in
    hv-tcp) run_hv "$n" 0 "$@" ;;
    hv-shm) run_hv "$n" 1 "$@" ;;
    mpi-tcp) run_mpi "$n" tcp "$@" || true ;;
    mpi-def) run_mpi "$n" def "$@" || true ;;
  esac | grep -o 'ROW .*' | sed "s/^/$impl $n $rep /" >> "$out/rows" || {
    case "$impl" in hv-*) echo "hv benchmark ($impl, $*) failed" >&2; exit 1 ;; esac; }
}

rows=()
for s in ${sizes//,/ }; do rows+=("--sizes $s"); done
[ ${#rn_args[@]} -gt 0 ] && rows+=("--sizes none ${rn_args[*]}")
for n in $ranks; do
  for rep in $(seq 1 "$reps"); do
    echo "ranks $n, repetition $rep/$reps ..." >&2
    for row in "${rows[@]}"; do
      # shellcheck disable=SC2086
      for pair in "hv-tcp mpi-tcp" "hv-shm mpi-def"; do
        set -- $pair
        [ "$have_mpi" = 1 ] || set -- "$1"
        # alternate who goes first, so that neither always runs right after the other's setup
        [ $((rep % 2)) = 0 ] && [ $# = 2 ] && set -- "$2" "$1"
        for impl in "$@"; do measure "$impl" "$n" "$rep" $row; done
      done
    done
  done
done

# rows: impl n rep ROW kind bytes time_us busbw -> medians per (impl, n, kind, bytes); x: the
# median over reps of the per-rep ratio.
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
  key = $1 SUBSEP $2 SUBSEP $5 SUBSEP $6;
  t[key] = t[key] " " $7; bw[key] = bw[key] " " $8;
  one[key SUBSEP $3] = $7; reps[$3] = 1;
  if (!(($2 SUBSEP $5 SUBSEP $6) in seen)) { seen[$2 SUBSEP $5 SUBSEP $6] = 1; order[++no] = $2 SUBSEP $5 SUBSEP $6 }
}
# median over reps of peer time / hv time, for keys a (hv) and b (peer); "    -" without pairs
function ratio(a, b,   r, list, got) {
  list = ""; got = 0;
  for (r in reps) {
    if ((a SUBSEP r) in one && (b SUBSEP r) in one && one[a SUBSEP r] > 0) {
      list = list " " (one[b SUBSEP r] / one[a SUBSEP r]); got = 1;
    }
  }
  return got ? sprintf("%5.2f", median(list)) : "    -";
}
END {
  last = "";
  split("hv-tcp mpi-tcp hv-shm mpi-def", impls, " ");
  for (i = 1; i <= no; i++) {
    split(order[i], p, SUBSEP); n = p[1]; kind = p[2]; bytes = p[3];
    if (n != last) {
      printf "\n%d ranks (busbw = bytes/time x 2(n-1)/n; x = median of per-repetition peer time / hv time)\n", n;
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
    x1 = ratio(impls[1] SUBSEP n SUBSEP kind SUBSEP bytes, impls[2] SUBSEP n SUBSEP kind SUBSEP bytes);
    x2 = ratio(impls[3] SUBSEP n SUBSEP kind SUBSEP bytes, impls[4] SUBSEP n SUBSEP kind SUBSEP bytes);
    printf "%-14s | %s | %s %s | %s | %s %s\n", row, cell[1], cell[2], x1, cell[3], cell[4], x2;
  }
}' "$out/rows"
