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

# ---- The node-loss benchmarks' cluster (bench_node_loss.sh, bench_lone_loss.sh,
# bench_silent_loss.sh, soak_silent.sh) ----

# bench_head HB_MS LEASE_MS [yaml lines...]: a head ($HEAD_BIN, else $BIN/hvhead) on a loopback
# port with its data in $D/data, token bench-token, the heartbeat and lease given and the extra
# yaml lines; sets HEAD and the CLIs' HV_TOKEN_FILE.
bench_head() {
    local hb=$1 lease=$2 l
    shift 2
    {
        echo "cluster_name: bench"
        echo "listen: 127.0.0.1:0"
        echo "data_dir: $D/data"
        echo "token: bench-token"
        echo "heartbeat_ms: $hb"
        echo "lease_ms: $lease"
        echo "kill_grace_ms: 1000"
        echo "log_level: notice"
        for l in "$@"; do echo "$l"; done
    } >"$D/head.yaml"
    export HV_TOKEN_FILE="$D/data/client.token" # the CLIs' credential, written by the head
    "${HEAD_BIN:-$BIN/hvhead}" start --config "$D/head.yaml" >"$D/head.out" 2>"$D/head.err" &
    PIDS="$PIDS $!"
    disown $!
    wait_for 10 grep -q 'listening on' "$D/head.out" || { echo "head did not start" >&2; cat "$D/head.err" >&2; exit 1; }
    HEAD=$(sed -nE 's/.*listening on ([^ ]+) .*/\1/p' "$D/head.out")
}

# join_agents NAME...: start_agent each, then wait until each has joined.
join_agents() {
    local n
    for n in "$@"; do start_agent "$n"; done
    for n in "$@"; do
        wait_for 20 grep -q joined "$D/agent-$n.out" || { echo "agent $n did not join" >&2; exit 1; }
    done
}

# bench_job N SECONDS [bench_elastic options...]: tests/perf/bench_elastic (a 1 MiB model, 5 ms
# between steps) as an elastic job -np N --min-np 1 --max-np N on $HEAD, hvsubmit run under
# ${IN_NS[@]} (e.g. ip netns exec NAME; none unless set) with the options ${SUB_OPTS[@]} (e.g.
# --env K=V); its output in $D/sub.out and sub.err, its pid in SUB; waits until N workers stepped.
bench_job() {
    local n=$1 secs=$2
    shift 2
    "${IN_NS[@]}" "$BIN/hvsubmit" --head "$HEAD" -np "$n" --min-np 1 --max-np "$n" --max-resets 100000 \
        "${SUB_OPTS[@]}" "$BIN/bench_elastic" --model $((1 << 20)) --seconds "$secs" --step-ms 5 "$@" \
        >"$D/sub.out" 2>"$D/sub.err" &
    SUB=$!
    PIDS="$PIDS $SUB"
    disown $SUB
    wait_for 60 full_size_above 0 "$n" || { echo "N=$n: the job did not start" >&2; tail "$D/sub.err" >&2; exit 1; }
}
IN_NS=()
SUB_OPTS=()

# kill_node NAME G: SIGKILLs node NAME's agent and its workers together and marks the kill (time,
# generation G) in $D/marks.
kill_node() {
    local victims t
    victims="$(cat "$D/agent-$1.pid") $(node_workers "$1")"
    t=$(now_ms)
    # shellcheck disable=SC2086 # pids: one word each
    kill -KILL $victims
    echo "kill $t $2 $1" >>"$D/marks"
}

# netns_bench PREFIX NET N: hosts in network namespaces (tests/netns_lib.sh's netns_hosts, removed
# on exit) for a head and N agents; exits 77 where that is not permitted. Sets P and H (the head's
# address there).
netns_bench() {
    P=$1
    # shellcheck disable=SC2064 # the names are fixed now
    trap "netns_clean $1 $3; cleanup" EXIT
    netns_hosts "$1" "$2" "$3" || { echo "cannot create network namespaces (root and ip netns needed)" >&2; exit 77; }
    H=$2.1:7000
    HEAD=$H
    IN_NS=(ip netns exec "${1}h")
}

# new_run: the next run's directory, D=$TMP/runN (RUN counts the runs).
new_run() {
    RUN=$((${RUN:-0} + 1))
    D=$TMP/run$RUN
    mkdir -p "$D"
}
