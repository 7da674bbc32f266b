# tests/netns_lib.sh: hosts in network namespaces on a bridge, for the tests and benchmarks that
# need a real network between the head, its agents and their workers (a link that goes down
# without a FIN or a RST: tests/fault/elastic_silent_loss.sh, tests/perf/bench_silent_loss.sh,
# tests/perf/soak_silent.sh). Sourced; needs root (ip netns). Nothing here leaves the namespaces
# it creates.
#
#   netns_hosts PREFIX NET N   creates ${PREFIX}h, the head's, holding bridge br0 at NET.1, and
#                              ${PREFIX}1..N at NET.2..NET.(N+1), each joined to the bridge by a
#                              veth pair (its own end: ${PREFIX}<i>x). 1 when namespaces are not
#                              permitted here (the caller skips), 2 on another failure.
#   netns_ns PREFIX I          the namespace of host I (h: the head's)
#   netns_link PREFIX I up|down  sets host I's own end of its link up or down
#   netns_pids PREFIX I        the pids running in host I's namespace
#   netns_clean PREFIX N       kills what runs in the namespaces and deletes them
#   netns_cluster DIR PREFIX NET N [YAML...]  a head in ${PREFIX}h (NET.1:7000, the head's
#                              defaults for heartbeat, lease and grace, plain text, token
#                              bench-token, the extra YAML lines) and one-slot agents n1..nN in
#                              hosts 1..N, their files in DIR; waits until all joined (wait_for,
#                              from the caller's library); adds their pids to PIDS and sets
#                              NETNS_HEAD and HV_TOKEN_FILE. 1 (and says why) when one did not
#                              start.
netns_ns() { echo "$1$2"; }

netns_hosts() {
    local p=$1 net=$2 n=$3 i
    ip netns add "${p}h" 2>/dev/null || return 1
    ip -n "${p}h" link set lo up || return 2
    ip -n "${p}h" link add br0 type bridge && ip -n "${p}h" link set br0 up &&
        ip -n "${p}h" addr add "$net.1/24" dev br0 || return 2
    for i in $(seq 1 "$n"); do
        ip netns add "$p$i" && ip -n "$p$i" link set lo up || return 2
        ip link add "$p${i}x" type veth peer name "$p${i}y" || return 2
        ip link set "$p${i}x" netns "$p$i" && ip link set "$p${i}y" netns "${p}h" || return 2
        ip -n "${p}h" link set "$p${i}y" master br0 && ip -n "${p}h" link set "$p${i}y" up || return 2
        ip -n "$p$i" addr add "$net.$((i + 1))/24" dev "$p${i}x" &&
            ip -n "$p$i" link set "$p${i}x" up || return 2
    done
}

netns_link() { ip -n "$1$2" link set "$1${2}x" "$3"; }

netns_pids() { ip netns pids "$1$2" 2>/dev/null; }

netns_clean() {
    local p=$1 n=$2 i
    for i in h $(seq 1 "$n"); do
        netns_pids "$p" "$i" | xargs -r kill -KILL 2>/dev/null
        ip netns del "$p$i" 2>/dev/null
    done
    return 0
}

netns_cluster() {
    local d=$1 p=$2 net=$3 n=$4 i l
    shift 4
    {
        echo "cluster_name: bench"
        echo "listen: 0.0.0.0:7000"
        echo "allow_insecure: true"
        echo "data_dir: $d/data"
        echo "token: bench-token"
        echo "log_level: info"
        for l in "$@"; do echo "$l"; done
    } >"$d/head.yaml"
    export HV_TOKEN_FILE="$d/data/client.token" HV_INSECURE=1
    NETNS_HEAD=$net.1:7000
    ip netns exec "${p}h" "$BIN/hvhead" start --config "$d/head.yaml" >"$d/head.out" 2>"$d/head.err" &
    PIDS="$PIDS $!"
    disown $!
    wait_for 10 grep -q 'listening on' "$d/head.out" || { echo "head did not start" >&2; cat "$d/head.err" >&2; return 1; }
    for i in $(seq 1 "$n"); do
        ip netns exec "$p$i" "$BIN/hvagent" join "$NETNS_HEAD" --token bench-token --name "n$i" \
            --slots 1 --work-dir "$d/agent-n$i" >"$d/agent-n$i.out" 2>"$d/agent-n$i.err" &
        PIDS="$PIDS $!"
        disown $!
    done
    for i in $(seq 1 "$n"); do
        wait_for 20 grep -q joined "$d/agent-n$i.out" || { echo "agent n$i did not join" >&2; return 1; }
    done
}

# netns_test_hosts PREFIX NET N: netns_hosts for a test (after lib.sh's hv_setup): the namespaces
# and what runs in them are removed by the test's cleanup; skips the test (77) where ip netns is
# not permitted, fails it when the namespaces cannot be made.
netns_test_hosts() {
    NETNS_P=$1 NETNS_N=$3
    trap 'netns_clean "$NETNS_P" "$NETNS_N"; hv_cleanup' EXIT
    netns_hosts "$1" "$2" "$3"
    case $? in
    0) ;;
    1) echo "SKIP: ip netns is not permitted here"; exit 77 ;;
    *) fail "cannot create the namespaces" ;;
    esac
}
