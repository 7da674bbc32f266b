# tests/wait_for.sh: wait_for SECONDS CMD...: polls CMD every 0.1 s until it succeeds; returns 1
# when SECONDS (times T_MULT, the sanitizer builds' multiplier, 1 unless set) pass first. Sourced by
# tests/lib.sh and by the perf scripts that start their own cluster (head_load.sh,
# submit_latency.sh).
wait_for() {
    local secs=$(( $1 * ${T_MULT:-1} )) i=0; shift
    while [ $i -lt $(( secs * 10 )) ]; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
