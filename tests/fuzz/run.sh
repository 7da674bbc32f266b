#!/bin/sh
# Runs hv's libFuzzer targets (tests/fuzz/fuzz_*.c) for a bounded time each, under ASan and UBSan.
#   tests/fuzz/run.sh [--seconds N] [--bin DIR] [--jobs N] [TARGET...]
# --seconds: per target (default 20); --bin: where fuzz_* are (default: build-fuzz/bin, which is
# configured with clang and built when missing); --jobs: targets run side by side (default 1).
# TARGET: config, rpc, linesplit, ... (default: every fuzz_*.c). The seed corpus
# tests/fuzz/corpus/TARGET is read, never written: new inputs go to a work directory
# (FUZZ_WORK, default a temporary one, removed unless a target failed). Prints each target's
# executions; exits 1 if any target found a crash, leak or UB (its reproducer is kept and named).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
seconds=20 bin="" jobs=1
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 64 ;;
    *) break ;;
    esac
done
targets="$*"
[ -n "$targets" ] || targets=$(cd "$here" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
if [ -z "$bin" ]; then
    bin=$src/build-fuzz/bin
    if [ ! -d "$src/build-fuzz" ]; then
        command -v clang >/dev/null || { echo "run.sh: clang is needed (deploy/install-deps.sh)" >&2; exit 69; }
        cmake -S "$src" -B "$src/build-fuzz" -DCMAKE_C_COMPILER=clang -DHV_FUZZ=ON \
            -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
    fi
    cmake --build "$src/build-fuzz" --target hv_fuzz -j"$(nproc)" >/dev/null || exit 1
fi
work=${FUZZ_WORK:-$(mktemp -d /tmp/hvfuzz.XXXXXX)}
mkdir -p "$work"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Inputs larger than a few KiB matter only to the line splitter (lines of 16 KiB).
max_len() { case "$1" in linesplit) echo 65536 ;; *) echo 16384 ;; esac; }

run_one() { # TARGET -> 0 clean, 1 found something
    t=$1
    exe=$bin/fuzz_$t
    [ -x "$exe" ] || { echo "fuzz $t: no $exe (configure with -DHV_FUZZ=ON and clang)"; return 1; }
    mkdir -p "$work/$t/corpus" "$work/$t/crash"
    seeds=$here/corpus/$t
    [ -d "$seeds" ] || seeds=""
    "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
        -print_final_stats=1 -artifact_prefix="$work/$t/crash/" "$work/$t/corpus" $seeds \
        >"$work/$t/log" 2>&1
    ec=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -n 1)
    if [ $ec -ne 0 ]; then
        echo "fuzz $t: FOUND a problem after ${execs:-?} executions (exit $ec); reproducer(s):"
        ls "$work/$t/crash/"* 2>/dev/null | sed 's/^/  /'
        grep -E 'ERROR|SUMMARY|runtime error' "$work/$t/log" | head -n 10 | sed 's/^/  /'
        echo "  log: $work/$t/log"
        return 1
    fi
    corp=$(ls "$work/$t/corpus" | wc -l)
    echo "fuzz $t: ok, ${execs:-?} executions in ${seconds} s, corpus $corp inputs"
    return 0
}

status=0
running=0
for t in $targets; do
    if [ "$jobs" -le 1 ]; then
        run_one "$t" || status=1
    else
        ( run_one "$t" ) >"$work/$t.result" 2>&1 &
        running=$((running + 1))
        if [ $running -ge "$jobs" ]; then wait; running=0; fi
    fi
done
if [ "$jobs" -gt 1 ]; then
    wait
    for t in $targets; do
        cat "$work/$t.result"
        grep -q ': ok,' "$work/$t.result" || status=1
    done
fi
if [ $status -eq 0 ] && [ -z "${FUZZ_WORK:-}" ]; then rm -rf "$work"; else echo "work directory: $work"; fi
exit $status
