# Shared by bench_actor.sh and bench_actor_py.sh (sourced, bash): the build directory, the
# options (--quick, --bin, --n, --size, --inflight, --help) into build, n, size and inflight, and
# the check that the bench_actor and actor_counter binaries (bench, actor) are built; then the
# scratch directory, its cleanup, wait_file and the run's secret.
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="${HV_BUILD_DIR:-$repo/build}"
n=20000
size=64
inflight=256
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) n=2000; shift ;;
    --bin) build="$2"; shift 2 ;;
    --n) n="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --inflight) inflight="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
    *) echo "$(basename "$0"): unknown argument $1" >&2; exit 2 ;;
  esac
done
bench="$build/bin/bench_actor"
actor="$build/examples/actor_counter"
for b in "$bench" "$actor"; do
  [ -x "$b" ] || { echo "missing $b (build the bench_actor and actor_counter targets)" >&2; exit 2; }
done

# A scratch directory $tmp and the processes started into pids, both cleaned up on exit;
# wait_file FILE WHAT waits up to 10 s for a process to write its address file.
tmp=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

wait_file() {
  for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done
  echo "$(basename "$0"): $2 did not start (no $1)" >&2
  exit 1
}

# A fresh random secret per run; it reaches the processes only through their environment.
export HV_ACTOR_SECRET=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
