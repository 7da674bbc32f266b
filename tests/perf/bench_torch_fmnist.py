"""bench_torch_fmnist.py: examples/python/train_fmnist.py ported to DistributedDataParallel on
Gloo, for tests/perf/bench_torch_fmnist.sh (the example's epoch time on hv against what a PyTorch
user has without hv).

The same model (train_fmnist.Net), the same IDX loader, the same batch per rank (32), SGD with
momentum 0.9 at --lr times the world size, and the same end of epoch (each rank evaluates its
share of the test set, the correct counts are summed): only the distribution differs.
DistributedSampler shards each epoch's permutation; DDP averages gradients in buckets during
backward over Gloo. Nothing is committed (DDP has no elastic state). Run it with
torch.distributed's environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE); rank 0 prints
  ddp_gloo: epoch=E size=W samples=N accuracy=A seconds=T
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
import train_fmnist  # noqa: E402  (Net, load_split; hv is imported but not initialised)


def main(argv):
    p = argparse.ArgumentParser(prog="bench_torch_fmnist.py")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.025)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=os.environ.get("HV_FMNIST_DIR") or train_fmnist.DEFAULT_DATA)
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    (x, y), (tx, ty) = (train_fmnist.load_split(a.data, "train", a.train_limit),
                        train_fmnist.load_split(a.data, "t10k", a.test_limit))
    model = torch.nn.parallel.DistributedDataParallel(train_fmnist.Net())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr * size, momentum=0.9)
    sampler = torch.utils.data.distributed.DistributedSampler(range(len(y)), num_replicas=size,
                                                              rank=rank, shuffle=True,
                                                              seed=a.seed)
    for epoch in range(a.epochs):
        t0 = time.monotonic()
        sampler.set_epoch(epoch)
        idx = list(sampler)
        seen = torch.zeros(1, dtype=torch.int64)
        for s in range(0, len(idx), a.batch_size):
            i = torch.tensor(idx[s:s + a.batch_size])
            opt.zero_grad()
            F.cross_entropy(model(x[i]), y[i]).backward()
            opt.step()
            seen += len(i)
        n = len(ty)
        lo, hi = n * rank // size, n * (rank + 1) // size
        correct = torch.zeros(1, dtype=torch.int64)
        model.eval()
        with torch.no_grad():
            for s in range(lo, hi, 500):
                e = min(hi, s + 500)
                correct += (model.module(tx[s:e]).argmax(1) == ty[s:e]).sum()
        model.train()
        dist.all_reduce(correct)
        dist.all_reduce(seen)
        if rank == 0:
            print("ddp_gloo: epoch=%d size=%d samples=%d accuracy=%.4f seconds=%.2f" %
                  (epoch, size, seen.item(), correct.item() / n, time.monotonic() - t0),
                  flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
