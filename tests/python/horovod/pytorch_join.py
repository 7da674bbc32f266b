"""pytorch_join.py: training on uneven data with hvd.join(), as Horovod documents join ("A
function that indicates that the rank finished processing data. All ranks that did not call
join() continue to process allreduce operations"; its tests, test_torch.py
test_horovod_join_allreduce, and the uneven-data pattern): every rank has a shard of its own
size (rank r: --base x (r + 1) samples), trains through hvd.DistributedOptimizer over a
DataLoader of its shard, and calls hvd.join() when its data runs out; the ranks still training
average their gradients with the joined ranks' zeros. After each epoch every rank takes the
parameters of the rank that joined last (join's return value), which trained through every
step. Only the import differs from a Horovod script (`import hv.torch as hvd`); it ends without
hvd.shutdown().

Rank 0 then replays the whole training in one process from every rank's shard (the same seeded
data; a rank with no batch left contributes zeros, Average divides by the world size) and
compares the parameters. It prints "join: epochs=E last=L steps=S1,S2,... max_diff=D exact=X",
X = 1 when the parameters match the replay (within 1e-5) and are identical on every rank.
"""

import argparse

import torch
import torch.nn.functional as F
import torch.utils.data

import hv.torch as hvd

parser = argparse.ArgumentParser(description="uneven data with hvd.join()")
parser.add_argument("--base", type=int, default=40, help="samples of rank 0's shard")
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)


def shard(r):
    """Rank r's samples: --base x (r + 1) of a fixed regression task."""
    g = torch.Generator().manual_seed(1000 + r)
    x = torch.randn(args.base * (r + 1), 8, generator=g)
    w = torch.arange(8.0).view(8, 1) / 8
    return x, x @ w + 0.1 * torch.randn(x.shape[0], 1, generator=g)


def make_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


x, y = shard(hvd.rank())
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                     batch_size=args.batch_size)
model = make_model()
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr),
                                     named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

last = -1
for epoch in range(args.epochs):
    for data, target in loader:
        optimizer.zero_grad()
        F.mse_loss(model(data), target).backward()
        optimizer.step()
    # This rank's data ran out: the others go on; join returns when every rank has joined.
    last = hvd.join()
    # A rank that joined early missed the later steps: take the model of the last one to join.
    hvd.broadcast_parameters(model.state_dict(), root_rank=last)
    hvd.broadcast_optimizer_state(optimizer, root_rank=last)

steps = hvd.allgather_object(len(loader))
params = torch.cat([p.detach().flatten() for p in model.parameters()])
same = all(torch.equal(params, p) for p in hvd.allgather_object(params))

if hvd.rank() == 0:
    # The replay: step s averages the gradients of the ranks that still have a batch s.
    ref = make_model()
    opt = torch.optim.SGD(ref.parameters(), lr=args.lr)
    shards = [torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*shard(r)),
                                          batch_size=args.batch_size) for r in range(hvd.size())]
    for epoch in range(args.epochs):
        iters = [iter(s) for s in shards]
        for s in range(max(steps)):
            total = [torch.zeros_like(p) for p in ref.parameters()]
            for r in range(hvd.size()):
                if s < steps[r]:
                    data, target = next(iters[r])
                    ref.zero_grad()
                    F.mse_loss(ref(data), target).backward()
                    for t, p in zip(total, ref.parameters()):
                        t += p.grad
            for p, t in zip(ref.parameters(), total):
                p.grad = t / hvd.size()
            opt.step()
    want = torch.cat([p.detach().flatten() for p in ref.parameters()])
    diff = (want - params).abs().max().item()
    print("join: epochs=%d last=%d steps=%s max_diff=%.2g exact=%d" %
          (args.epochs, last, ",".join(map(str, steps)), diff, int(same and diff < 1e-5)),
          flush=True)
