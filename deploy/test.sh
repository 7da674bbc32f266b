#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what the build and the tests
# need, builds hv twice (RelWithDebInfo, and with AddressSanitizer + UBSan), and runs ctest on
# both with labels unit, integration and fault (gpu, perf and container tests are left to their
# own runs; container: deploy/container/build.sh, minutes of debootstrap and podman builds;
# the sanitizer build, at -O1, also leaves out the labels long (the longest scenarios, run by the
# plain one), package and python);
# then builds the libFuzzer targets with clang and runs each for HV_FUZZ_SECONDS (default 10;
# label fuzz; tests/fuzz/run.sh --seconds N runs them longer). The sanitizer and fuzz builds run
# at nice 19 while the plain suite runs (which mostly waits); ctest runs one test more than the
# cores at a time, and tests/CMakeLists.txt keeps the ones that time something alone.
# Usage: deploy/test.sh [--no-sanitize] [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
SAN=1
if [ "${1:-}" = "--no-sanitize" ]; then SAN=0; shift; fi
deploy/install-deps.sh
echo "== format (clang-format --dry-run on every tracked .c/.h)"
if ! git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror; then
    echo "== format check FAILED: run clang-format -i on the files above"
    exit 1
fi
jobs=$(nproc)
configure() { # BUILD_DIR CMAKE_ARGS...
    local dir=$1; shift
    echo "== configure $dir ($*)"
    cmake -S . -B "$dir" "$@" >/dev/null
}
build() { # BUILD_DIR [TARGET]: the log in BUILD_DIR/build.log, its errors on failure
    local dir=$1
    if ! cmake --build "$dir" ${2:+--target "$2"} -j"$jobs" >"$dir/build.log" 2>&1; then
        grep -E -B2 -A6 'error|warning' "$dir/build.log" | head -80
        echo "== build of $dir FAILED (full log: $dir/build.log)"
        return 1
    fi
}
run_tests() { # BUILD_DIR: ctest, one test more than the cores at a time (the tests mostly wait on
    # processes and rounds; tests/CMakeLists.txt keeps the ones that time something alone)
    echo "== test $1"
    (cd "$1" && ctest --output-on-failure -LE "${EXCLUDE:-gpu|perf|container}" -j"${CT_JOBS:-$((jobs + 1))}" \
        "${CTEST_ARGS[@]}")
}
CTEST_ARGS=("$@")
ASAN_ARGS=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DHV_SANITIZE=ON
    -DHV_TEST_TIMEOUT_MULTIPLIER=3)
FUZZ_ARGS=(-DCMAKE_C_COMPILER=clang -DHV_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DHV_FUZZ_SECONDS="${HV_FUZZ_SECONDS:-10}")
configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== build build"
build build
# The plain suite mostly waits (processes, rounds, leases): the sanitizer and fuzz builds run
# beside it at the lowest priority, so that their minutes are not added to the suite's.
BG=""
if [ $SAN = 1 ]; then
    configure build-asan "${ASAN_ARGS[@]}"
    configure build-fuzz "${FUZZ_ARGS[@]}"
    echo "== build build-asan and build-fuzz (in the background, nice 19)"
    (nice -n 19 bash -c "$(declare -f build); jobs=$jobs; build build-asan && build build-fuzz hv_fuzz") &
    BG=$!
fi
rc=0
run_tests build || rc=$?
if [ -n "$BG" ]; then
    if ! wait "$BG"; then exit 1; fi
fi
[ $rc = 0 ] || exit $rc
if [ $SAN = 1 ]; then
    # grpc's own threads keep a few process-lifetime allocations; they are not ours.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    # -O1: the sanitizers' usual level (gcc -O1 also sees truncations that -O0 misses); the
    # Python binding's tests run on the plain build only (pure Python: its C paths are the C
    # unit tests', which run here).
    # Instrumented processes are CPU-bound: one test per core here.
    CT_JOBS=$jobs EXCLUDE='gpu|perf|long|package|python' HV_TEST_TIMEOUT_MULTIPLIER=3 \
        run_tests build-asan
    echo "== fuzz build-fuzz (clang, libFuzzer, ASan+UBSan, ${HV_FUZZ_SECONDS:-10} s per target)"
    (cd build-fuzz && ctest --output-on-failure -L fuzz -j"$jobs")
fi
echo "== all suites passed"
