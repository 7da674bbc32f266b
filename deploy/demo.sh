#!/usr/bin/env bash
# The quick-start demo: installs what hv needs, builds it, and runs a local cluster on embedded
# defaults (a head with its sqlite state in a temporary data directory, two local agents with
# 2 slots each), submits examples/hello across 4 workers, prints the workers' output, and stops
# everything cleanly. Exit status: hvsubmit's.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
deploy/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "demo: build ready in build/ (bin/: hvhead hvagent hvsubmit hvctl; examples/: hello ...)"

WORK=$(mktemp -d /tmp/hv-demo.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# The head: examples/local.yaml (127.0.0.1:7000, token hv-local-dev), state under $WORK.
build/bin/hvhead start --config examples/local.yaml --data-dir "$WORK/data" \
    >"$WORK/head.out" 2>"$WORK/head.log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q 'listening on' "$WORK/head.out" && break; sleep 0.1; done
grep -q 'listening on' "$WORK/head.out" || { cat "$WORK/head.out" "$WORK/head.log"; exit 1; }
cat "$WORK/head.out"
HEAD=$(sed -E -n 's/.*listening on ([^ ]+) .*/\1/p' "$WORK/head.out")
# hvsubmit and hvctl authenticate with the client token the head wrote into its data dir
export HV_TOKEN_FILE=$WORK/data/client.token

for n in local-a local-b; do
    build/bin/hvagent join "$HEAD" --token hv-local-dev --name "$n" --slots 2 \
        --work-dir "$WORK/$n" >"$WORK/$n.out" 2>"$WORK/$n.log" &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q joined "$WORK/$n.out" && break; sleep 0.1; done
    grep -q joined "$WORK/$n.out" || { cat "$WORK/$n.out" "$WORK/$n.log"; exit 1; }
    cat "$WORK/$n.out"
done

echo "demo: hvsubmit -np 4 build/examples/hello"
rc=0
build/bin/hvsubmit --head "$HEAD" -np 4 build/examples/hello || rc=$?
echo "demo: cluster state:"
build/bin/hvctl --head "$HEAD" nodes
build/bin/hvctl --head "$HEAD" jobs
echo "demo: stopping the agents and the head"
exit $rc
