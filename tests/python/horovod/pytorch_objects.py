"""pytorch_objects.py: Horovod's helpers for Python objects and start-up state, as its
documentation and examples use them (horovod.torch.functions: broadcast_object,
allgather_object, broadcast_parameters, broadcast_optimizer_state; pytorch_mnist.py and
pytorch_imagenet_resnet50.py start that way), with only the import changed
(`import hv.torch as hvd`); it ends without hvd.shutdown().

It also checks that cross_rank, cross_size and is_homogeneous agree with every rank's local rank
and size. Rank 0 prints "objects: ok size=W hosts=H" when every check passed on every rank (the
checks' results are gathered), else "objects: FAIL <what>".
"""

import torch

import hv.torch as hvd

hvd.init()
torch.set_num_threads(1)
rank, size = hvd.rank(), hvd.size()
failed = []


def check(ok, what):
    if not ok:
        failed.append("rank %d: %s" % (rank, what))


# A run configuration decided on rank 0 (resume epoch, a schedule, a tensor) reaches every rank.
config = {"resume_from_epoch": 3, "schedule": [(0, 0.1), (30, 0.01)], "name": "run-α",
          "mask": torch.arange(4) * 2} if rank == 0 else None
config = hvd.broadcast_object(config, root_rank=0)
check(config["resume_from_epoch"] == 3 and config["schedule"][1] == (30, 0.01) and
      config["name"] == "run-α" and config["mask"].tolist() == [0, 2, 4, 6], "broadcast_object")
# From another root, and a large object (1 MiB of bytes).
blob = hvd.broadcast_object(bytes([size - 1]) * (1 << 20) if rank == size - 1 else None,
                            root_rank=size - 1)
check(len(blob) == 1 << 20 and blob[-1] == size - 1, "broadcast_object from the last rank")
# Every rank's metrics, in rank order.
metrics = hvd.allgather_object({"rank": rank, "loss": 1.0 / (rank + 1), "seen": list(range(rank))})
check([m["rank"] for m in metrics] == list(range(size)) and metrics[-1]["seen"] ==
      list(range(size - 1)), "allgather_object")
# The model and the optimizer state start from rank 0's (Horovod's start-up).
torch.manual_seed(rank)  # different initial weights on every rank
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
model(torch.randn(5, 4)).sum().backward()
optimizer.step()  # Adam's moments exist now, different on every rank
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
mine = [p.detach().clone() for p in model.parameters()]
theirs = hvd.allgather_object(mine)
check(all(torch.equal(a, b) for other in theirs for a, b in zip(mine, other)),
      "broadcast_parameters")
st = optimizer.state_dict()
check(st["param_groups"][0]["lr"] == 0.01, "broadcast_optimizer_state: lr")
moments = hvd.allgather_object([s["exp_avg"] for s in st["state"].values()])
check(all(torch.equal(a, b) for other in moments for a, b in zip(moments[0], other)),
      "broadcast_optimizer_state: moments")
# A tensor from one root with the tensor broadcast (Horovod's resume_from_epoch idiom).
epoch = hvd.broadcast(torch.tensor(7 if rank == 0 else 0), root_rank=0,
                      name="resume_from_epoch").item()
check(epoch == 7, "broadcast of resume_from_epoch")

# The hosts (cross_rank, cross_size) agree with every rank's local rank and size.
where = hvd.allgather_object((hvd.cross_rank(), hvd.local_rank(), hvd.local_size()))
hosts = {}
for c, lr, ls in where:
    hosts.setdefault(c, []).append((lr, ls))
check(sorted(hosts) == list(range(hvd.cross_size())) and
      all(sorted(lr for lr, _ in v) == list(range(v[0][1])) for v in hosts.values()) and
      hvd.is_homogeneous() == (len({v[0][1] for v in hosts.values()}) == 1),
      "cross_rank/cross_size/is_homogeneous: %s" % where)

everything = hvd.allgather_object(failed)
if rank == 0:
    bad = [f for fs in everything for f in fs]
    print("objects: ok size=%d hosts=%d" % (size, hvd.cross_size()) if not bad else
          "objects: FAIL " + "; ".join(bad), flush=True)
