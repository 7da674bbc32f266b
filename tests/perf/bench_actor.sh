#!/usr/bin/env bash
# bench_actor.sh: actor calls against the floor, a bare gRPC unary round trip, in one command.
#
#   tests/perf/bench_actor.sh [--quick] [--bin BUILD_DIR] [--n N] [--size BYTES] [--inflight K]
#
# Starts three server processes on this machine, all on 127.0.0.1: the actor
# examples/actor_counter (its "echo" method: BYTES in, BYTES out), a gRPC echo server (hv's rpc
# layer over gRPC core, bench_actor grpc-server) and a bare TCP echo (bench_actor tcp-server).
# Then bench_actor, a second process, measures in this order:
#   tcp-pingpong     N bare TCP round trips of BYTES (blocking send/recv: the kernel's share)
#   grpc-unary-sync  N unary gRPC calls one at a time (hv_rpc_unary; the floor)
#   actor-sync       N actor calls one at a time (hv_actor_call)
#   actor-pipeK      N actor calls with K in flight on one connection (hv_actor_call_async)
# and prints median and p99 latency (microseconds) and calls per second for each, then the
# actor's synchronous median as a multiple of the gRPC one (issue 17's goal: <= 1.5) and the
# pipelined rate (goal: >= 20000/s). Defaults: N=20000, 64 bytes, K=256; --quick: N=2000.
# Creation through the head (create -> first call served, 1 and 100 actors across 4 agents) is
# bench_actor_create.sh.
set -euo pipefail

. "$(dirname "$0")/bench_actor_args.sh"

HV_ACTOR_CLASS=counter HV_ACTOR_LISTEN=127.0.0.1:0 HV_ACTOR_ADDR_FILE="$tmp/actor.addr" \
  "$actor" & pids+=($!)
"$bench" grpc-server "$tmp/grpc.addr" & pids+=($!)
"$bench" tcp-server "$tmp/tcp.addr" --size "$size" & pids+=($!)
wait_file "$tmp/actor.addr" actor_counter
wait_file "$tmp/grpc.addr" "the gRPC echo server"
wait_file "$tmp/tcp.addr" "the TCP echo server"

echo "# $(nproc) CPUs, $(uname -r); $size bytes in and out; N=$n"
printf '%-16s %8s %10s %10s %12s\n' mode calls median_us p99_us calls_per_s
"$bench" tcp "$(cat "$tmp/tcp.addr")" --n "$n" --size "$size" | tee "$tmp/out"
"$bench" grpc "$(cat "$tmp/grpc.addr")" --n "$n" --size "$size" | tee -a "$tmp/out"
"$bench" actor "$(cat "$tmp/actor.addr")" --n "$n" --size "$size" --inflight "$inflight" \
  | tee -a "$tmp/out"
awk '$1 == "grpc-unary-sync" { g = $3 } $1 == "actor-sync" { a = $3 } $1 ~ /^actor-pipe/ { p = $5 }
     END { printf "actor-sync median / gRPC median = %.2f (goal <= 1.5); pipelined %.0f calls/s (goal >= 20000)\n", a / g, p }' "$tmp/out"
