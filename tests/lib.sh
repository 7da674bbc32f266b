# tests/lib.sh: shared helpers for hv's integration and fault tests (POSIX sh + bash features).
# Each test sources this file, calls hv_setup, starts a real hvhead and real hvagents on loopback
# with ports chosen at run time, drives them with hvsubmit/hvctl, and asserts what a user would
# see. Every wait is bounded; hv_cleanup kills whatever the test started.
set -u
BIN=${HV_BIN_DIR:?HV_BIN_DIR not set (run through ctest)}
EX=${HV_EXAMPLES_DIR:?HV_EXAMPLES_DIR not set (run through ctest)}
T_MULT=${HV_TEST_TIMEOUT_MULTIPLIER:-1}
TOKEN=hv-test-token
PIDS=""

hv_cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
    # workers run in their own process groups: kill anything still running from our tree
    if [ -n "${TMP:-}" ] && [ -d "$TMP" ]; then
        for p in $(pgrep -f "$TMP" 2>/dev/null) $(workers); do kill -KILL "$p" 2>/dev/null; done
        if [ "${HV_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
    fi
}

hv_setup() {
    TMP=$(mktemp -d /tmp/hvtest.XXXXXX)
    # hvsubmit/hvctl authenticate with the client token the head writes into its data dir
    # (write_config puts every test's head there, whichever way the test starts it)
    export HV_TOKEN_FILE=$TMP/data/client.token
    trap hv_cleanup EXIT
    # A signal must still run the cleanup: a test piped into `head` dies of SIGPIPE, and
    # without this its head, agents and workers would outlive it (and skew what runs next).
    trap 'exit 130' INT TERM HUP PIPE
}

fail() {
    echo "FAIL: $*" >&2
    for f in "$TMP"/*.out "$TMP"/*.err; do
        [ -f "$f" ] || continue
        echo "----- $f (last 30 lines)" >&2
        tail -n 30 "$f" >&2
    done
    exit 1
}

pass() { echo "PASS: $*"; }

# skip_without_torch: exit 77 (skipped) unless /usr/bin/python3 has torch (Debian's python3-torch).
# It finds the module without importing it: `import torch` costs 1 to 5 s of CPU a time, and the
# Python tests that ask run alone (tests/CMakeLists.txt); their workers import it anyway.
skip_without_torch() {
    local probe='import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'
    if ! /usr/bin/python3 -c "$probe" 2>/dev/null; then
        echo "SKIP: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"
        exit 77
    fi
}

# wait_for SECONDS CMD...: polls CMD every 0.1 s until it succeeds; returns 1 on timeout.
. "${HV_SRC_DIR:?HV_SRC_DIR not set (run through ctest)}/tests/wait_for.sh"

# write_config FILE [extra yaml lines...]: a fast-lease config on an ephemeral loopback port.
write_config() {
    local f=$1; shift
    {
        echo "cluster_name: test"
        echo "listen: ${HV_LISTEN:-127.0.0.1:0}"
        echo "data_dir: $TMP/data"
        echo "token: $TOKEN"
        echo "heartbeat_ms: ${HB_MS:-200}"
        echo "lease_ms: ${LEASE_MS:-2000}"
        echo "kill_grace_ms: 1000"
        echo "log_level: info"
        for l in "$@"; do echo "$l"; done
    } > "$f"
}

# free_port: a loopback TCP port nobody listens on now (for a head that must restart on the
# same address).
free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# alive_nodes: how many nodes `hvctl nodes` shows alive.
alive_nodes() { "$BIN/hvctl" --head "$HEAD" nodes 2>/dev/null | awk '$3 == "alive"' | wc -l; }
alive_nodes_is() { [ "$(alive_nodes)" -eq "$1" ]; }

# start_head [yaml lines...]: sets HEAD=host:port and HEAD_PID.
start_head() {
    [ -f "$TMP/head.yaml" ] || write_config "$TMP/head.yaml" "$@"
    # Count the ready lines of earlier starts before this one can print its own: counted after
    # the start, a head quicker than the count left the wait for a line already there.
    local n_ready; n_ready=$(grep -c 'listening on' "$TMP/head.out" 2>/dev/null || true)
    "$BIN/hvhead" start --config "$TMP/head.yaml" >>"$TMP/head.out" 2>>"$TMP/head.err" &
    HEAD_PID=$!
    PIDS="$PIDS $HEAD_PID"
    wait_for 10 sh -c "[ \$(grep -c 'listening on' '$TMP/head.out') -gt ${n_ready:-0} ]" \
        || fail "hvhead did not print its ready line"
    HEAD=$(grep 'listening on' "$TMP/head.out" | tail -n 1 | sed -E 's/.*listening on ([^ ]+) .*/\1/')
    export HV_HEAD=$HEAD
}

# start_agent NAME SLOTS [extra args]: waits for the agent's "joined" line.
start_agent() {
    local name=$1 slots=$2; shift 2
    "$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name "$name" --slots "$slots" \
        --work-dir "$TMP/agent-$name" "$@" >"$TMP/agent-$name.out" 2>"$TMP/agent-$name.err" &
    local pid=$!
    PIDS="$PIDS $pid"
    eval "AGENT_PID_$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')=$pid"
    wait_for 15 grep -q 'joined' "$TMP/agent-$name.out" || fail "hvagent $name did not join"
}

agent_pid() { eval "echo \${AGENT_PID_$(echo "$1" | tr -c 'a-zA-Z0-9\n' '_')}"; }

assert_grep() { # FILE PATTERN [message]
    grep -q -- "$2" "$1" || fail "${3:-expected '$2' in $1}"
}

assert_no_grep() {
    if grep -q -- "$2" "$1"; then fail "${3:-unexpected '$2' in $1}"; fi
}

# job_state ID: prints the job's state via hvctl --json.
job_state() {
    "$BIN/hvctl" --head "$HEAD" --json job "$1" 2>/dev/null | sed -nE 's/.*"state": *"([a-z]+)".*/\1/p' | head -n 1
}

# workers [JOB]: pids of worker processes (cwd inside one of this test's agents' job dirs).
# One find over /proc: a readlink process per pid took seconds per scan on a loaded machine,
# longer than the short jobs some tests watch.
workers() {
    # (agents the test starts work in $TMP/agent-NAME, the autoscaler's in $TMP/data/instances)
    find /proc -mindepth 2 -maxdepth 2 -name cwd \( -lname "$TMP/agent-*/jobs/${1:-}*" \
        -o -lname "$TMP/data/instances/*/jobs/${1:-}*" \) 2>/dev/null | cut -d/ -f3
}
n_workers() { workers "$@" | wc -l; }
workers_at_least() { [ "$(n_workers "$1")" -ge "$2" ]; }  # JOB N
no_workers() { [ "$(n_workers "${1:-}")" -eq 0 ]; }       # [JOB]
state_is() { [ "$(job_state "$1")" = "$2" ]; }             # JOB STATE
lines_at_least() { [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$3" ]; }  # FILE PATTERN N

# data_on_tmpfs SIZE NAME: mounts a real tmpfs of SIZE (e.g. 24m) named NAME on $TMP/data, the
# head's data directory, for the disk-full tests; exits 77 (skipped) where mount is not
# permitted. The cleanup unmounts it before hv_cleanup removes $TMP.
data_on_tmpfs() {
    mkdir -p "$TMP/data"
    if ! mount -t tmpfs -o "size=$1,mode=0700" "$2" "$TMP/data" 2>"$TMP/mount.err"; then
        echo "SKIP: cannot mount a tmpfs: $(cat "$TMP/mount.err")"
        exit 77
    fi
    trap 'umount -l "$TMP/data" 2>/dev/null; hv_cleanup' EXIT
}

# start_agents SLOTS NAME...: start_agent NAME SLOTS for each NAME.
start_agents() {
    local slots="$1" n; shift
    for n in "$@"; do start_agent "$n" "$slots"; done
}

# pin_head_port: the head's config listens on the port it was given, so that restart_head
# brings it back on the same address.
pin_head_port() {
    sed -i "s/^listen: .*/listen: 127.0.0.1:${HEAD##*:}/" "$TMP/head.yaml"
}

# restart_head [SECONDS]: SIGKILLs the head, waits SECONDS (1 unless told) and starts it again
# (on the same address after pin_head_port).
restart_head() {
    kill -KILL "$HEAD_PID"
    wait "$HEAD_PID" 2>/dev/null
    sleep "${1:-1}"
    start_head
}

# submit_sleepers NP SECONDS: a job of NP sleepers (examples/sleeper SECONDS) in the background,
# hvsubmit's output in $TMP/submit.out and .err, its pid in SUB; waits until all NP started.
submit_sleepers() {
    "$BIN/hvsubmit" -np "$1" "$EX/sleeper" "$2" >"$TMP/submit.out" 2>"$TMP/submit.err" &
    SUB=$!
    PIDS="$PIDS $SUB"
    wait_for 15 lines_at_least "$TMP/submit.out" started "$1" || fail "$1 workers did not start"
}

# ev: the head's events as `hvctl events` prints them (the newest 5000); has TEXT: one of them
# says TEXT.
ev() { "$BIN/hvctl" --head "$HEAD" events --limit 5000 2>/dev/null; }
has() { ev | grep -q -- "$1"; }

# python_env: for the tests whose workers run /usr/bin/python3 (skipped, 77, without torch):
# PY (and TRAIN, for elastic.sh's submit) the interpreter; PRE, the sanitizer runtimes to preload
# into the uninstrumented interpreter when libhv.so is instrumented (empty in a plain build);
# PY_ENV, the hvsubmit options that pass them on with leak detection off (empty without them).
# shellcheck disable=SC2034 # PY, TRAIN, PY_ENV: read by the tests and elastic.sh
python_env() {
    PY=/usr/bin/python3
    skip_without_torch
    TRAIN=$PY
    PRE=$(ldd "$BIN/../lib/libhv.so" 2>/dev/null | awk '/lib(a|ub)san/ { printf "%s%s", s, $3; s = ":" }')
    PY_ENV=""
    [ -z "$PRE" ] || PY_ENV="--env LD_PRELOAD=$PRE --env ASAN_OPTIONS=detect_leaks=0"
}

# hv_setup_users PREFIX: hv_setup for the tests that run workers as other users (skipped, 77,
# without root or useradd): two system users without a home or a shell, UA=PREFIXa<pid> and
# UB=PREFIXb<pid>, removed by the cleanup; $TMP is made reachable by their workers.
hv_setup_users() {
    [ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
    command -v useradd >/dev/null || { echo "SKIP: no useradd"; exit 77; }
    UA=${1}a$$
    UB=${1}b$$
    for u in "$UA" "$UB"; do
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u" \
            2>/dev/null || { userdel "$UA" 2>/dev/null; echo "SKIP: useradd failed"; exit 77; }
    done
    hv_setup
    trap 'hv_cleanup; userdel "$UA" 2>/dev/null; userdel "$UB" 2>/dev/null' EXIT
    chmod 755 "$TMP" # the work dirs below it must be reachable by the workers' users
}

# start_metrics_head [yaml lines...]: start_head with a metrics listener on a free loopback port,
# MPORT.
start_metrics_head() {
    MPORT=$(free_port)
    start_head "metrics:" "  listen: 127.0.0.1:$MPORT" "$@"
}

# keeper_addr NODE: the address of NODE's agent's Keeper service (the state copies it keeps for
# other nodes' jobs), from the agent's own log line; "" when it keeps none (waits up to 10 s).
keeper_addr() {
    wait_for 10 grep -q 'HV-AGENT-KEEPER: keeps' "$TMP/agent-$1.err" || return 0
    sed -n 's/.*HV-AGENT-KEEPER: keeps .* copies at \([^ ,]*\).*/\1/p' "$TMP/agent-$1.err" | head -n 1
}
