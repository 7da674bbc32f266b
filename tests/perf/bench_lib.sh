# Shared by the cluster benchmarks (bench_elastic.sh, bench_node_loss.sh, bench_lone_loss.sh,
# bench_silent_loss.sh, soak_silent.sh, bench_copy.sh, bench_actor_create.sh), sourced after their
# options are read: a scratch directory $TMP whose processes ($PIDS, anything
# started with $TMP in its command line, and anything whose working directory is under $TMP: the
# workers of `hvsubmit -- python3 script.py`, whose command line names the script relatively)
# are killed and which is removed on exit; now_ms; and wait_for, which polls a command every
# 0.1 s for at most SECONDS.
TMP=$(mktemp -d "/tmp/${BENCH_TMP_PREFIX:-hvbench}.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    for p in $(pgrep -f "$TMP" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    # Workers outlive a killed agent, and a job's surviving ring keeps training without its head
    # (Python workers for the whole --seconds 3600 of bench_elastic.sh before this line).
    for p in $({ find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$TMP/*" -printf '%h\n' \
        2>/dev/null || true; } | sed 's|^/proc/||'); do
        kill -KILL "$p" 2>/dev/null || true
    done
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
# What a run's bench_elastic workers printed to $D/sub.out: the newest generation that stepped,
# a generation's size, and whether a round newer than GEN (with N workers) has stepped.
max_gen() { sed -n 's/.*BENCH step [0-9]* gen=\([0-9]*\).*/\1/p' "$D/sub.out" | sort -n | tail -n 1; }
size_of_gen() { sed -n "s/.*BENCH step [0-9]* gen=$1 size=\([0-9]*\).*/\1/p" "$D/sub.out" | head -n 1; }
gen_above() { local g; g=$(max_gen); [ -n "$g" ] && [ "$g" -gt "$1" ]; }
full_size_above() { # GEN N: a round newer than GEN with N workers stepped
    local g; g=$(max_gen); [ -n "$g" ] && [ "$g" -gt "$1" ] && [ "$(size_of_gen "$g")" = "$2" ]
}
# The node-loss benchmarks (bench_node_loss.sh, bench_lone_loss.sh) run one-slot agents on this
# machine, each in $D/agent-NAME, joined to $HEAD with the token bench-token: the pids of a job's
# workers on node NAME, and an agent started (in a subshell: its SIGKILL is no job of this shell
# to report; its pid in $D/agent-NAME.pid).
node_workers() {
    { find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$D/agent-$1/jobs/*" -printf '%h\n' 2>/dev/null || true; } |
        sed -E 's|^/proc/([0-9]+)$|\1|'
}
start_agent() { # NAME
    ("$BIN/hvagent" join "$HEAD" --token bench-token --name "$1" --slots 1 \
        --work-dir "$D/agent-$1" >>"$D/agent-$1.out" 2>>"$D/agent-$1.err" &
     echo $! >"$D/agent-$1.pid")
    PIDS="$PIDS $(cat "$D/agent-$1.pid")"
}
