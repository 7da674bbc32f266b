#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what the build and the tests
# need, builds hv twice (RelWithDebInfo, and with AddressSanitizer + UBSan), and runs ctest on
# both with labels unit, integration and fault (gpu, perf and container tests are left to their
# own runs; container: deploy/container/build.sh, minutes of debootstrap and podman builds;
# the sanitizer build, at -O1, also leaves out the labels long (the longest scenarios, run by the
# plain one), package and python);
# then builds the libFuzzer targets with clang and runs each for HV_FUZZ_SECONDS (default 10;
# label fuzz; tests/fuzz/run.sh --seconds N runs them longer).
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
run_suite() { # BUILD_DIR CMAKE_ARGS...
    local dir=$1; shift
    echo "== configure $dir ($*)"
    cmake -S . -B "$dir" "$@" >/dev/null
    echo "== build $dir"
    if ! cmake --build "$dir" -j"$jobs" >"$dir/build.log" 2>&1; then
        grep -E -B2 -A6 'error|warning' "$dir/build.log" | head -80
        echo "== build of $dir FAILED (full log: $dir/build.log)"
        return 1
    fi
    echo "== test $dir"
    (cd "$dir" && ctest --output-on-failure -LE "${EXCLUDE:-gpu|perf|container}" -j"$jobs" "${CTEST_ARGS[@]}")
}
CTEST_ARGS=("$@")
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ $SAN = 1 ]; then
    # grpc's own threads keep a few process-lifetime allocations; they are not ours.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    # -O1: the sanitizers' usual level (gcc -O1 also sees truncations that -O0 misses); the
    # Python binding's tests run on the plain build only (pure Python: its C paths are the C
    # unit tests', which run here).
    EXCLUDE='gpu|perf|long|package|python' HV_TEST_TIMEOUT_MULTIPLIER=3 run_suite build-asan \
        -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DHV_SANITIZE=ON \
        -DHV_TEST_TIMEOUT_MULTIPLIER=3
    echo "== fuzz build-fuzz (clang, libFuzzer, ASan+UBSan, ${HV_FUZZ_SECONDS:-10} s per target)"
    cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DHV_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DHV_FUZZ_SECONDS="${HV_FUZZ_SECONDS:-10}" >/dev/null
    if ! cmake --build build-fuzz --target hv_fuzz -j"$jobs" >build-fuzz/build.log 2>&1; then
        grep -E -B2 -A6 'error|warning' build-fuzz/build.log | head -80
        echo "== build of build-fuzz FAILED (full log: build-fuzz/build.log)"
        exit 1
    fi
    (cd build-fuzz && ctest --output-on-failure -L fuzz -j"$jobs")
fi
echo "== all suites passed"
