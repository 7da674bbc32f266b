#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what the build and the tests
# need, builds hv twice (RelWithDebInfo, and with AddressSanitizer + UBSan), and runs ctest on
# both with labels unit, integration and fault (gpu, perf and container tests are left to their
# own runs; container: deploy/container/build.sh, minutes of debootstrap and podman builds;
# the sanitizer build, at -O1, also leaves out the labels long (the longest scenarios, run by the
# plain one), package and python);
# then builds the libFuzzer targets with clang and runs each for HV_FUZZ_SECONDS (default 10;
# label fuzz; tests/fuzz/run.sh --seconds N runs them longer). The sanitizer and fuzz builds run
# at nice 19 while the plain suite runs (which mostly waits), the fuzz targets at nice 19 beside
# the sanitizer suite's first minute; ctest runs one test more than the cores at a time in
# each suite, the longest first (tests/ctest_costs.txt), and
# tests/CMakeLists.txt keeps the ones that time something alone (HV_TEST_JOBS and
# HV_TEST_JOBS_SAN set the two -j).
# Usage: deploy/test.sh [--no-sanitize] [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
SAN=1
if [ "${1:-}" = "--no-sanitize" ]; then SAN=0; shift; fi
deploy/install-deps.sh
echo "== format (clang-format --dry-run on every tracked .c/.h, beside the plain build)"
FORMAT_LOG=$(mktemp)
(git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror) >"$FORMAT_LOG" 2>&1 &
FORMAT=$!
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
# seed_costs BUILD_DIR COLUMN: ctest starts the longest tests first when it knows their times
# (Testing/Temporary/CTestCostData.txt, which it writes after each run); a clean clone has none,
# and ctest would start them in the order they were declared, the longest ones last: the times of
# tests/ctest_costs.txt (column 2: the plain build's, 3: the sanitizer build's) stand in for them.
seed_costs() {
    local f=$1/Testing/Temporary/CTestCostData.txt
    [ -s "$f" ] && return 0
    mkdir -p "${f%/*}"
    awk -v c="$2" '!/^#/ && $c != "-" { print $1, 1, $c }' tests/ctest_costs.txt >"$f"
}
run_tests() { # BUILD_DIR: ctest, CT_JOBS tests at a time (the tests mostly wait on processes and
    # rounds; tests/CMakeLists.txt keeps the ones that time something alone)
    echo "== test $1"
    seed_costs "$1" "${COST_COLUMN:-2}"
    (cd "$1" && ctest --output-on-failure -LE "${EXCLUDE:-gpu|perf|container}" -j"$CT_JOBS" \
        "${CTEST_ARGS[@]}")
}
CTEST_ARGS=("$@")
ASAN_ARGS=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DHV_SANITIZE=ON
    -DHV_TEST_TIMEOUT_MULTIPLIER=3)
FUZZ_ARGS=(-DCMAKE_C_COMPILER=clang -DHV_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DHV_FUZZ_SECONDS="${HV_FUZZ_SECONDS:-10}")
configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== build build"
brc=0
build build || brc=$?
if ! wait "$FORMAT"; then
    cat "$FORMAT_LOG"
    rm -f "$FORMAT_LOG"
    echo "== format check FAILED: run clang-format -i on the files above"
    exit 1
fi
rm -f "$FORMAT_LOG"
[ $brc = 0 ] || exit $brc
# The plain suite mostly waits (processes, rounds, leases): the sanitizer and fuzz builds
# (configured there too) run beside it at the lowest priority, so that their minutes are not
# added to the suite's.
BG=""
if [ $SAN = 1 ]; then
    echo "== configure and build build-asan and build-fuzz (in the background, nice 19)"
    (
        renice -n 19 -p $BASHPID >/dev/null
        configure build-asan "${ASAN_ARGS[@]}" && configure build-fuzz "${FUZZ_ARGS[@]}" &&
            build build-asan && build build-fuzz hv_fuzz
    ) &
    BG=$!
fi
rc=0
# One test more than the cores: the plain suite's tests spend most of their time waiting (in the
# CI run of 2026-12-03 12:14, 1109 s of tests that run beside others took 375 s at -j3 on 2
# cores, beside the builds at nice 19). Two per core (HV_TEST_JOBS=4) is projected ~1 min
# shorter (tests/ctest_sim.py) but not yet shown free of timing flakes on a quiet machine.
CT_JOBS=${HV_TEST_JOBS:-$((jobs + 1))} run_tests build || rc=$?
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
    # Instrumented tests take about 1.2 times their plain time (they too mostly wait: 824 s
    # against 677 s for the same 170 tests in the CI run of 2026-12-03 12:14, at -j2 alone
    # against -j3 beside the builds): one more test than the cores here.
    # The fuzz targets (CPU-bound, each for a fixed time) run at the lowest priority beside the
    # suite's first minute, which holds its longest tests; the tests that run alone come last
    # (ctest starts a RUN_SERIAL test only when nothing else runs), by when the targets have ended.
    echo "== fuzz build-fuzz (clang, libFuzzer, ASan+UBSan, ${HV_FUZZ_SECONDS:-10} s per target; in the background, nice 19)"
    (cd build-fuzz && nice -n 19 ctest --output-on-failure -L fuzz -j1 >fuzz.log 2>&1) &
    FUZZ=$!
    CT_JOBS=${HV_TEST_JOBS_SAN:-$((jobs + 1))} COST_COLUMN=3 EXCLUDE='gpu|perf|long|package|python' HV_TEST_TIMEOUT_MULTIPLIER=3 \
        run_tests build-asan || rc=$?
    frc=0
    wait "$FUZZ" || frc=$?
    echo "== fuzz build-fuzz (its ctest output)"
    cat build-fuzz/fuzz.log
    [ $rc = 0 ] || exit $rc
    [ $frc = 0 ] || exit $frc
fi
echo "== all suites passed"
