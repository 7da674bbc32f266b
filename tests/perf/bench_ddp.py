#!/usr/bin/python3
"""bench_ddp.py: a training step with hv.torch.parallel.DistributedDataParallel against torch's
DistributedDataParallel on Gloo (and hv.torch.DistributedOptimizer beside them), side by side in
the same two processes. Run through tests/perf/bench_ddp.sh (one command).

    bench_ddp.py --launch N --pypath DIR [--steps S] [--reps R] [--layers L] [--width W]
                                              forks N ranks (hv: a temporary HV_RDZV_DIR, no
                                              head; Gloo: a loopback TCP store)

The model: L layers Linear(W, W) + ReLU (default 16 of 1024: 16.8 M float32 parameters, 64 MiB
of gradients, three 25 MiB buckets), a batch of 32 per rank, loss = mean of the output squared,
SGD. Each side has its own copy of the model and does the same work:

  hvddp  opt.zero_grad(); loss(m(x)).backward(); opt.step()   m = hv.torch.parallel.DDP(model)
  ddp    the same                                             m = torch's DDP(model) (Gloo)
  hvopt  the same, no wrapper                                 opt = hvd.DistributedOptimizer(SGD)

A timed block is S steps after a barrier; the kinds rotate their order per repetition. Rank 0
prints ROW <kind> <rep> <ms per step> per block, then checks that the three sides computed the
same parameters (same data, same averaged gradients).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_launch  # noqa: E402


def rank_main(steps, reps, layers, width):
    import torch
    import torch.distributed as dist
    import hv.torch as hvd
    torch.set_num_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    dist.init_process_group("gloo", rank=rank, world_size=size)

    def model():
        torch.manual_seed(1)
        mods = []
        for _ in range(layers):
            mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        return torch.nn.Sequential(*mods)

    torch.manual_seed(100 + rank)
    x = torch.randn(32, width)
    hv_m = hvd.parallel.DistributedDataParallel(model())
    th_m = torch.nn.parallel.DistributedDataParallel(model())
    op_m = model()
    sides = {
        "hvddp": (hv_m, torch.optim.SGD(hv_m.parameters(), lr=1e-3), hvd.barrier),
        "ddp": (th_m, torch.optim.SGD(th_m.parameters(), lr=1e-3), dist.barrier),
        "hvopt": (op_m, hvd.DistributedOptimizer(torch.optim.SGD(op_m.parameters(), lr=1e-3),
                                                 named_parameters=op_m.named_parameters()),
                  hvd.barrier),
    }
    if rank == 0:
        n = sum(p.numel() for p in op_m.parameters())
        print("INFO layers=%d width=%d parameters=%d gradient_bytes=%d buckets=%d" %
              (layers, width, n, 4 * n, len(hv_m._buckets)), flush=True)

    def step(kind):
        m, opt, _ = sides[kind]
        opt.zero_grad()
        m(x).pow(2).mean().backward()
        opt.step()

    for k in sides:  # warm-up: .grad, buckets, hv's buffers
        step(k)
        step(k)
    kinds = list(sides)
    for r in range(reps):
        order = kinds[r % 3:] + kinds[:r % 3]
        for k in order:
            sides[k][2]()
            t0 = time.perf_counter()
            for _ in range(steps):
                step(k)
            ms = (time.perf_counter() - t0) / steps * 1e3
            if rank == 0:
                print("ROW %s %d %.1f" % (k, r, ms), flush=True)
    worst = 0.0
    for k in ("hvddp", "hvopt"):
        for a, b in zip(sides[k][0].parameters(), th_m.parameters()):
            worst = max(worst, float((a - b).abs().max()))
    if rank == 0:
        print("CHECK hv-vs-ddp max difference %.3g" % worst, flush=True)
    dist.destroy_process_group()
    hvd.shutdown()
    return 0 if worst <= 1e-5 else 1


def main(argv):
    opts = {"--launch": 0, "--pypath": None, "--steps": 5, "--reps": 7, "--layers": 16,
            "--width": 1024}
    rest = []
    i = 1
    while i < len(argv):
        if argv[i] not in opts or i + 1 >= len(argv):
            print("bench_ddp.py: bad argument %s (see the docstring)" % argv[i], file=sys.stderr)
            return 2
        v = argv[i + 1]
        opts[argv[i]] = v if argv[i] == "--pypath" else int(v)
        if argv[i] not in ("--launch", "--pypath"):
            rest += [argv[i], v]
        i += 2
    if opts["--launch"]:
        return torch_launch.launch(opts["--launch"], opts["--pypath"], __file__, rest,
                                   prefix="hv-bench-ddp-")
    return rank_main(opts["--steps"], opts["--reps"], opts["--layers"], opts["--width"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
