#!/usr/bin/env bash
# The quick-start demo: installs what hv needs, builds it, and runs the main job on embedded
# defaults: a head (examples/autoscale.yaml, state in a temporary data directory) whose
# autoscaler keeps one local agent and buys more as a job grows; elastic_train learning
# Fashion-MNIST with a growth schedule (2 workers, 4 from epoch 2, 6 from epoch 4); the per-epoch
# lines (world size, loss, accuracy), the autoscaler's decisions as they happen, the job's cost,
# and the idle nodes going away after the job. Exit status: hvsubmit's.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "demo: build ready in build/ (bin/: hvhead hvagent hvsubmit hvctl; examples/: elastic_train ...)"

WORK=$(mktemp -d /tmp/hv-demo.XXXXXX)
HEAD_PID=""
WATCH=""
# The machine is left as it was found: a clean stop of the head (SIGINT) gives back the agents
# its autoscaler started; anything of the demo's still running after that is named and stopped.
cleanup() {
    if [ -n "$WATCH" ]; then kill "$WATCH" 2>/dev/null || true; fi
    if [ -n "$HEAD_PID" ]; then
        echo "demo: stopping the head (it gives back the agents its autoscaler started)"
        kill -INT "$HEAD_PID" 2>/dev/null || true
        wait "$HEAD_PID" 2>/dev/null || true
    fi
    wait 2>/dev/null || true
    local left
    left=$(pgrep -f -- "$WORK" || true)
    if [ -n "$left" ]; then
        echo "demo: still running after the head stopped (stopping them):"
        ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" || true
        kill -KILL $left 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

build/bin/hvhead start --config examples/autoscale.yaml --data-dir "$WORK/data" \
    >"$WORK/head.out" 2>"$WORK/head.log" &
HEAD_PID=$!
for _ in $(seq 100); do grep -q 'listening on' "$WORK/head.out" && break; sleep 0.1; done
grep -q 'listening on' "$WORK/head.out" || { cat "$WORK/head.out" "$WORK/head.log"; exit 1; }
cat "$WORK/head.out"
export HV_HEAD; HV_HEAD=$(sed -E -n 's/.*listening on ([^ ]+) .*/\1/p' "$WORK/head.out")
export HV_TOKEN_FILE=$WORK/data/client.token # the client token the head wrote
ctl() { build/bin/hvctl "$@"; }

alive() { ctl nodes 2>/dev/null | awk '$3 == "alive"' | wc -l; }
for _ in $(seq 200); do [ "$(alive)" -ge 1 ] && break; sleep 0.1; done
echo "demo: the autoscaler keeps its minimum of 1 node:"
ctl nodes

# The autoscaler's decisions as they happen (bounded: it stops with the job).
watch_events() {
    local seen=0 out
    while :; do
        out=$(ctl events --limit 1000 2>/dev/null) || out=""
        printf '%s\n' "$out" | awk -v s="$seen" 'NR > 1 && $1 > s && $6 ~ /^autoscaler\./' |
            while read -r _ _ t _ _ kind msg; do echo "demo: [$t] $kind $msg"; done
        seen=$(printf '%s\n' "$out" | awk -v s="$seen" 'NR > 1 && $1 > s {s = $1} END {print s}')
        sleep 1
    done
}
watch_events &
WATCH=$!

echo "demo: hvsubmit --grow 0:2,2:4,4:6 build/examples/elastic_train --epochs 6"
rc=0
build/bin/hvsubmit --grow 0:2,2:4,4:6 build/examples/elastic_train --epochs 6 \
    --train-limit 30000 --test-limit 5000 || rc=$?
sleep 1
kill "$WATCH" 2>/dev/null || true
echo "demo: what the cluster cost (hvctl cost):"
ctl cost
echo "demo: waiting for the idle nodes to go (idle_timeout_s: 8) ..."
for _ in $(seq 60); do [ "$(alive)" -le 1 ] && break; sleep 1; done
ctl events --limit 1000 | awk '$6 == "autoscaler.terminate"' |
    while read -r _ _ t _ _ kind msg; do echo "demo: [$t] $kind $msg"; done
ctl nodes
exit $rc
