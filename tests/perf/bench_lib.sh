# Shared by the cluster benchmarks (bench_elastic.sh, bench_node_loss.sh, bench_copy.sh), sourced
# after their options are read: a scratch directory $TMP whose processes ($PIDS, and anything
# started with $TMP in its command line) are killed and which is removed on exit; now_ms; and
# wait_for, which polls a command every 0.1 s for at most SECONDS.
TMP=$(mktemp -d "/tmp/${BENCH_TMP_PREFIX:-hvbench}.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $(pgrep -f "$TMP" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
now_ms() { date +%s%3N; }
wait_for() { # SECONDS CMD...: 1 when CMD did not succeed in time
    local i=0
    local n=$(($1 * 10))
    shift
    while ! "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -ge $n ] && return 1
        sleep 0.1
    done
}
