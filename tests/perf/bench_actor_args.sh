# Shared by bench_actor.sh and bench_actor_py.sh (sourced, bash): the build directory, the
# options (--quick, --bin, --n, --size, --inflight, --help) into build, n, size and inflight, and
# the check that the bench_actor and actor_counter binaries (bench, actor) are built.
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
