#!/bin/sh
# terminate.sh NAME: SIGTERM to the agent (it drains, then exits), SIGKILL after 30 s.
#   terminate: "deploy/providers/local/terminate.sh {name}"
set -eu
dir=${HV_LOCAL_DIR:-/tmp/hv-local-instances}/$1
[ -f "$dir/pid" ] || exit 0 # never started or already gone
pid=$(cat "$dir/pid")
kill -TERM "$pid" 2>/dev/null || { rm -f "$dir/pid"; exit 0; }
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -KILL -- "-$pid" 2>/dev/null || true
rm -f "$dir/pid"
