#!/bin/sh
# list.sh: the names of the local instances whose agent is alive, one per line.
#   list: "deploy/providers/local/list.sh"
set -eu
base=${HV_LOCAL_DIR:-/tmp/hv-local-instances}
[ -d "$base" ] || exit 0
for f in "$base"/*/pid; do
    [ -f "$f" ] || continue
    kill -0 "$(cat "$f")" 2>/dev/null && basename "$(dirname "$f")"
done
exit 0
