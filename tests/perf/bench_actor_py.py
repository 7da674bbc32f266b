#!/usr/bin/python3
"""bench_actor_py.py: the measuring side of tests/perf/bench_actor_py.sh: calls from Python
(hv.actor) to an actor's "echo" method, BYTES in and out. Prints one line per mode, in the
format of bench_actor ("mode calls median_us p99_us calls_per_s"):
  py-sync       N calls one at a time (handle.call): latency of each, calls/s over the run
  py-pipeK      N calls with K in flight on one handle (call_async, result in order)
    bench_actor_py.py HOST:PORT PREFIX [--n N] [--size B] [--inflight K]
PREFIX names the actor in the mode ("py-c": Python calling the C actor). Secret: HV_ACTOR_SECRET.
"""
import os
import sys
import time

import hv.actor


def main(argv):
    addr, prefix = argv[0], argv[1]
    opts = dict(zip(argv[2::2], argv[3::2]))
    n = int(opts.get("--n", 20000))
    size = int(opts.get("--size", 64))
    k = int(opts.get("--inflight", 256))
    h = hv.actor.connect(addr, os.environ["HV_ACTOR_SECRET"])
    data = b"x" * size
    for _ in range(200):  # warm up
        h.call("echo", data)
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        r = h.call("echo", data)
        lat.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    assert r == data
    lat.sort()
    print("%-16s %8d %10.1f %10.1f %12.0f" % (prefix + "-sync", n, lat[n // 2] * 1e6,
                                              lat[n * 99 // 100] * 1e6, n / wall), flush=True)
    pending = []
    t0 = time.perf_counter()
    for _ in range(n):
        if len(pending) == k:
            pending.pop(0).result()
        pending.append(h.call_async("echo", data))
    for f in pending:
        f.result()
    wall = time.perf_counter() - t0
    print("%-16s %8d %10s %10s %12.0f" % ("%s-pipe%d" % (prefix, k), n, "-", "-", n / wall),
          flush=True)
    h.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
