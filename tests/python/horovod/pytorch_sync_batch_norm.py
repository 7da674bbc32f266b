"""pytorch_sync_batch_norm.py: a convolutional network with hvd.SyncBatchNorm in place of
BatchNorm2d (Horovod's horovod.torch.SyncBatchNorm), trained with hvd.DistributedOptimizer as in
Horovod's examples, with only the import changed (`import hv.torch as hvd`); it ends without
hvd.shutdown().

Each rank trains on its share of every global batch. Rank 0 replays the training in one process
with torch's BatchNorm2d over the whole global batch (every rank's share, the same seeded data),
which is what synchronised batch normalisation computes, and compares the parameters and the
running statistics. It prints "syncbn: steps=S size=W max_diff=D exact=X", X = 1 when they match
(within 1e-4) and every rank holds the same parameters.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import hv.torch as hvd

parser = argparse.ArgumentParser(description="SyncBatchNorm")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=4, help="per rank")
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)


def make_model(bn):
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), bn(8), nn.ReLU(),
                         nn.Conv2d(8, 4, 3, padding=1), bn(4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))


def global_batch(step):
    g = torch.Generator().manual_seed(500 + step)
    n = args.batch_size * hvd.size()
    return torch.randn(n, 3, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


model = make_model(hvd.SyncBatchNorm)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr),
                                     named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
lo = hvd.rank() * args.batch_size
for step in range(args.steps):
    data, target = global_batch(step)
    data, target = data[lo:lo + args.batch_size], target[lo:lo + args.batch_size]
    optimizer.zero_grad()
    # The mean over the rank's samples; DistributedOptimizer averages over the ranks: the mean
    # over the global batch.
    F.cross_entropy(model(data), target).backward()
    optimizer.step()

state = torch.cat([t.detach().flatten().float() for t in model.state_dict().values()])
same = all(torch.equal(state, s) for s in hvd.allgather_object(state))
if hvd.rank() == 0:
    ref = make_model(nn.BatchNorm2d)
    opt = torch.optim.SGD(ref.parameters(), lr=args.lr)
    for step in range(args.steps):
        data, target = global_batch(step)
        opt.zero_grad()
        F.cross_entropy(ref(data), target).backward()
        opt.step()
    want = torch.cat([t.detach().flatten().float() for t in ref.state_dict().values()])
    diff = (want - state).abs().max().item()
    print("syncbn: steps=%d size=%d max_diff=%.2g exact=%d" %
          (args.steps, hvd.size(), diff, int(same and diff < 1e-4)), flush=True)
