#!/usr/bin/env bash
# bench_actor_py.sh: actor calls from Python (hv.actor), beside the same calls from C, in one
# command.
#
#   tests/perf/bench_actor_py.sh [--quick] [--bin BUILD_DIR] [--n N] [--size BYTES] [--inflight K]
#
# Starts two actors on 127.0.0.1: the C example examples/actor_counter and a Python actor with an
# "echo" method (hv.actor.serve). Then measures, each from a second process, BYTES in and out:
#   c-c-sync / c-c-pipeK    C calling the C actor (bench_actor actor: the C figures)
#   py-c-sync / py-c-pipeK  Python calling the C actor (bench_actor_py.py)
#   py-py-sync / py-py-pipeK  Python calling the Python actor
#   c-py-sync / c-py-pipeK  C calling the Python actor (the actor side's share)
# Each line: mode, calls, median and p99 latency (us; synchronous modes), calls per second.
# Defaults: N=20000, 64 bytes, K=256; --quick: N=2000. Python is /usr/bin/python3.
set -euo pipefail

. "$(dirname "$0")/bench_actor_args.sh"
[ -f "$build/python/hv/actor.py" ] || { echo "missing $build/python/hv (build hv_python)" >&2; exit 2; }
export PYTHONPATH="$build/python"

HV_ACTOR_CLASS=counter HV_ACTOR_LISTEN=127.0.0.1:0 HV_ACTOR_ADDR_FILE="$tmp/c.addr" \
  "$actor" & pids+=($!)
cat > "$tmp/echo_actor.py" <<'PY'
import hv.actor

@hv.actor.actor_class(name="echo")
class Echo:
    def __init__(self, arg):
        pass

    def echo(self, data):
        return data

hv.actor.serve(Echo)
PY
HV_ACTOR_LISTEN=127.0.0.1:0 HV_ACTOR_ADDR_FILE="$tmp/py.addr" \
  /usr/bin/python3 "$tmp/echo_actor.py" & pids+=($!)
wait_file "$tmp/c.addr" actor_counter
wait_file "$tmp/py.addr" "the Python echo actor"

echo "# $(nproc) CPUs, $(uname -r), $(/usr/bin/python3 -V); $size bytes in and out; N=$n"
printf '%-16s %8s %10s %10s %12s\n' mode calls median_us p99_us calls_per_s
"$bench" actor "$(cat "$tmp/c.addr")" --n "$n" --size "$size" --inflight "$inflight" \
  | sed 's/^actor-/c-c-/'
/usr/bin/python3 "$here/bench_actor_py.py" "$(cat "$tmp/c.addr")" py-c --n "$n" --size "$size" \
  --inflight "$inflight"
/usr/bin/python3 "$here/bench_actor_py.py" "$(cat "$tmp/py.addr")" py-py --n "$n" --size "$size" \
  --inflight "$inflight"
"$bench" actor "$(cat "$tmp/py.addr")" --n "$n" --size "$size" --inflight "$inflight" \
  | sed 's/^actor-/c-py-/'
