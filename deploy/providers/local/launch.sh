#!/bin/sh
# launch.sh NAME HEAD TOKEN_FILE SLOTS: starts `hvagent join` on this machine in the background,
# prints the agent's pid as the handle. HV_AGENT (default: hvagent on PATH) and HV_LOCAL_DIR
# (default /tmp/hv-local-instances) are read from the environment.
#   launch: "deploy/providers/local/launch.sh {name} {head} {token_file} {slots}"
set -eu
name=$1 head=$2 token_file=$3 slots=$4
agent=${HV_AGENT:-hvagent}
dir=${HV_LOCAL_DIR:-/tmp/hv-local-instances}/$name
mkdir -p "$dir"
chmod 700 "$dir"
# setsid: the agent leads its own session, so terminate can stop its whole group
setsid "$agent" join "$head" --name "$name" --slots "$slots" --token-file "$token_file" \
    --work-dir "$dir" </dev/null >>"$dir/agent.log" 2>&1 &
pid=$!
# The head kills the launch command's process group when the command exits: return only once the
# agent has left it (setsid done, it leads its own session), else it may be killed with it.
i=0
while [ "$(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ')" != "$pid" ] && [ $i -lt 100 ]; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
    i=$((i + 1))
done
echo "$pid" >"$dir/pid"
echo "$pid"
