#!/usr/bin/python3
"""bench_torch.py: hv.torch's allreduce against torch.distributed with Gloo (what a PyTorch user
has without hv), side by side in the same processes, and the binding's cost per call against
libhv's C benchmark. Run through tests/perf/bench_torch.sh (one command).

    bench_torch.py --launch N --pypath DIR [--sizes 4K,1M,64M] [--runs R] [--named-only]
                                            forks N ranks meeting through a temporary
                                            HV_RDZV_DIR (hv) and a loopback TCP store (Gloo);
                                            --named-only: named_calls alone (no Gloo rows)
Each rank initialises both hv and a Gloo process group. For every size and run, back to back:
  hv      hvd.allreduce_(t, op=hvd.Sum)   in place, like dist.all_reduce
  hv-avg  hvd.allreduce(t)                Horovod's default: a new tensor, Average
  gloo    dist.all_reduce(t)              in place, SUM
  gloo-avg  t.clone(), dist.all_reduce, div_  hv-avg's meaning written with torch.distributed
Then, per size, named_calls: the unnamed hvd.allreduce_(t, op=hvd.Sum) against the named
blocking call (name=...: Horovod scripts name their tensors) and an async one waited at once
(hvd.synchronize(hvd.allreduce_async_(...))), in blocks of consecutive calls of one kind, the
kinds' blocks alternating: ROW nm-unnamed / nm-named / nm-sync <bytes> <median over blocks of
the mean us per call>.
A run times `iters` calls (256 MiB of traffic, 3..2000 calls) after a barrier; rank 0 prints
ROW <kind> <bytes> <median us per call over runs> lines and, per size, gloo/hv ratios.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_launch  # noqa: E402


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def iters_for(nbytes):
    return max(3, min(2000, (256 << 20) // nbytes))


def gloo_average(dist, t):
    """What hvd.allreduce(t) does, written with torch.distributed: a new tensor, averaged."""
    out = t.clone()
    dist.all_reduce(out)
    return out.div_(dist.get_world_size())


def rank_main(sizes, runs, named_only=False):
    import torch
    import torch.distributed as dist
    import hv.torch as hvd
    hvd.init()
    dist.init_process_group("gloo", rank=hvd.rank(), world_size=hvd.size())
    rows = {}
    for nbytes in sizes:
        n = nbytes // 4
        t = torch.ones(n, dtype=torch.float32)
        if named_only:
            rows.update(named_calls(hvd, t, nbytes, runs))
            continue
        it = iters_for(nbytes)
        kinds = {
            "hv": (lambda: hvd.allreduce_(t, op=hvd.Sum), hvd.barrier),
            "hv-avg": (lambda: hvd.allreduce(t), hvd.barrier),
            "gloo": (lambda: dist.all_reduce(t), dist.barrier),
            "gloo-avg": (lambda: gloo_average(dist, t), dist.barrier),
        }
        times = {k: [] for k in kinds}
        for k, (fn, _) in kinds.items():  # warm-up
            for _ in range(min(it, 10)):
                fn()
        for r in range(runs):
            order = list(kinds) if r % 2 == 0 else list(reversed(list(kinds)))
            for k in order:
                fn, barrier = kinds[k]
                barrier()
                t0 = time.perf_counter()
                for _ in range(it):
                    fn()
                times[k].append((time.perf_counter() - t0) / it)
        for k in kinds:
            rows[(k, nbytes)] = statistics.median(times[k])
        rows.update(named_calls(hvd, t, nbytes, runs))
    if hvd.size() == 1 and not named_only:
        rows.update(binding_cost(torch, hvd, runs))
    if hvd.rank() == 0:
        for (k, nbytes), secs in rows.items():
            print("ROW %s %d %.2f" % (k, nbytes, secs * 1e6), flush=True)
    dist.destroy_process_group()
    hvd.shutdown()


def named_calls(hvd, t, nbytes, runs):
    """The named blocking call and an async one waited at once against the unnamed call. Each
    run times a block of consecutive calls of one kind after a barrier (the mean per call), the
    kinds' blocks alternating (the order rotating from run to run) so that the machine's load
    hits the three alike; the median over runs per kind: ROW nm-<kind> <bytes> <us per call>.

    Blocks, not calls timed one by one: two ranks in a sequence of blocking calls fall into a
    rhythm where every other call of a rank absorbs the other rank's arrival (the rank that
    arrived last leaves the round first and arrives first at the next call), so single-call
    times are two-valued (about 5 and 30 us at 4 KiB on 2 cores), and with kinds interleaved
    call by call the long ones land on one position of the cycle: a median per kind then shows
    whichever kind holds that position (u,n alternating: 26.5 / 4.5 us; n,u: 28.3 / 4.8 us,
    named or not). A block's mean counts both halves of the rhythm."""
    kinds = {
        "nm-unnamed": lambda: hvd.allreduce_(t, op=hvd.Sum),
        "nm-named": lambda: hvd.allreduce_(t, op=hvd.Sum, name="bench.named"),
        "nm-sync": lambda: hvd.synchronize(hvd.allreduce_async_(t, op=hvd.Sum,
                                                                 name="bench.sync")),
    }
    order = list(kinds)
    block = max(3, min(200, iters_for(nbytes)))
    blocks = max(5, runs)
    times = {k: [] for k in kinds}
    for fn in kinds.values():  # warm-up (the names' first negotiation)
        fn()
    for i in range(blocks):
        for j in range(len(order)):
            k = order[(i + j) % len(order)]
            fn = kinds[k]
            hvd.barrier()
            t0 = time.perf_counter()
            for _ in range(block):
                fn()
            times[k].append((time.perf_counter() - t0) / block)
    return {(k, nbytes): statistics.median(v) for k, v in times.items()}


def binding_cost(torch, hvd, runs):
    """One rank, 4 KiB, in one process and interleaved (so the machine's drift cancels):
      py        hvd.allreduce_(t, op=hvd.Sum)
      ctypes    the same hv_allreduce called straight through ctypes (no hv.torch code)
      ffi       a ctypes call of hv_allreduce that libhv refuses at once (bad dtype): the cost of
                crossing into C with 5 arguments, and nothing else
    The binding's cost per call is then py - ctypes + ffi."""
    from hv import _lib
    t = torch.ones(1024)
    p, n = t.data_ptr(), t.numel()
    kinds = {
        "py": lambda: hvd.allreduce_(t, op=hvd.Sum),
        "ctypes": lambda: _lib.hv_allreduce(p, p, n, _lib.FLOAT32, _lib.SUM),
        "ffi": lambda: _lib.hv_allreduce(p, p, n, 99, _lib.SUM),
    }
    times = {k: [] for k in kinds}
    for _ in range(runs * 3):
        for k, fn in kinds.items():
            t0 = time.perf_counter()
            for _ in range(2000):
                fn()
            times[k].append((time.perf_counter() - t0) / 2000)
    return {("cost-" + k, 4096): statistics.median(v) for k, v in times.items()}


def launch(n, pypath, argv):
    return torch_launch.launch(n, pypath, __file__, argv, prefix="hv-bench-torch-")


def main(argv):
    sizes, runs, n, pypath = [4 << 10, 1 << 20, 64 << 20], 7, 0, None
    named_only = False
    rest = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--named-only":
            named_only = True
            rest.append(a)
            i += 1
            continue
        if a == "--launch":
            n = int(argv[i + 1])
        elif a == "--pypath":
            pypath = argv[i + 1]
        elif a == "--sizes":
            sizes = [parse_size(s) for s in argv[i + 1].split(",")]
            rest += [a, argv[i + 1]]
        elif a == "--runs":
            runs = int(argv[i + 1])
            rest += [a, argv[i + 1]]
        else:
            print("bench_torch.py: unknown argument %s" % a, file=sys.stderr)
            return 2
        i += 2
    if n > 0:
        return launch(n, pypath or "", rest)
    rank_main(sizes, runs, named_only)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
