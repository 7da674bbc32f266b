"""ddp_cases.py: the scenario of torch_test.py that checks hv.torch.parallel.DistributedDataParallel
against torch's own DDP over Gloo (issue 27, section 2). Every rank's process runs both: hv
(2 ranks meeting through HV_RDZV_DIR, no head) and torch.distributed with the gloo backend
(a FileStore in the same temporary directory, GLOO_SOCKET_IFNAME=lo: loopback only), the same
seeds, the same data, and compares:

  numerics   20 steps of SGD with momentum on an MLP with BatchNorm (buffers broadcast at every
             forward), parameters different per rank before the wrapper (broadcast from rank 0 at
             construction), small buckets (several allreduces per backward): parameters and
             buffers after hv's DDP equal torch's within 1e-5 relative, the same on both ranks;
             every bucket started from a hook during backward (the overlap)
  no_sync    2 local backward passes under no_sync() then a synchronised one, 10 steps
  unused     find_unused_parameters=True, zero_grad(set_to_none=True): a head used on one rank
             only (locally unused, globally used: torch gives it the average), a head unused on
             every rank at some steps and a layer never used (.grad stays None, as torch's)
  refusals   no gradient without find_unused_parameters (RuntimeError naming the parameter),
             process_group, mixed_precision, register_comm_hook, join, device_ids on a CPU
             module, an unknown keyword; state_dict with torch DDP's "module." prefix;
             torch.distributed's names in hv.torch.parallel
"""

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

import hv.torch as hvd
from hv.torch.parallel import DistributedDataParallel as HvDDP
from torch_test import expect_raises

STEPS = 20
RTOL = 1e-5


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(20, 64)
        self.bn = torch.nn.BatchNorm1d(64)
        self.fc2 = torch.nn.Linear(64, 64)
        self.fc3 = torch.nn.Linear(64, 5)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.bn(self.fc1(x))))))


class Branchy(torch.nn.Module):
    """A trunk, two heads chosen per call, and a layer no forward uses."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Linear(20, 32)
        self.head_a = torch.nn.Linear(32, 5)
        self.head_b = torch.nn.Linear(32, 5)
        self.never = torch.nn.Linear(32, 5)

    def forward(self, x, which):
        h = F.relu(self.trunk(x))
        return self.head_a(h) if which == "a" else self.head_b(h)


def data(rank, step, n=16):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, 20, generator=g), torch.randint(0, 5, (n,), generator=g)


def model(cls, rank):
    torch.manual_seed(7 + rank)  # different per rank: the wrapper must broadcast rank 0's
    return cls()


def close(what, a, b):
    """a equals b within RTOL relative (of b's largest magnitude)."""
    scale = max(float(b.abs().max()), 1e-12)
    err = float((a.double() - b.double()).abs().max()) / scale
    assert err <= RTOL, "%s: hv differs from torch DDP by %.3g relative (> %g)" % (what, err,
                                                                                  RTOL)
    return err


def compare(kind, hv_mod, th_mod):
    worst = 0.0
    th = dict(th_mod.state_dict())
    for k, v in hv_mod.state_dict().items():
        assert k in th, "%s: %s is not in torch DDP's state_dict" % (kind, k)
        if v.dtype.is_floating_point:
            worst = max(worst, close("%s %s" % (kind, k), v, th[k]))
        else:
            assert torch.equal(v, th[k]), "%s: %s differs" % (kind, k)
    mine = torch.cat([p.detach().reshape(-1) for p in hv_mod.parameters()])
    both = hvd.allgather(mine.unsqueeze(0))
    assert torch.equal(both[0], both[1]), "%s: ranks' parameters differ after hv DDP" % kind
    return worst


def train_numerics(wrap, rank):
    m = wrap(model(MLP, rank))
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    buckets = []
    for s in range(STEPS):
        x, y = data(rank, s)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        buckets.append(dict(getattr(m, "last_backward", {})))
    return m, buckets


def check_numerics(rank):
    th, _ = train_numerics(lambda mod: torch.nn.parallel.DistributedDataParallel(mod), rank)
    hv, buckets = train_numerics(lambda mod: HvDDP(mod, bucket_cap_mb=0.001), rank)
    worst = compare("numerics", hv, th)
    nb = len(hv._buckets)
    assert nb >= 3, "expected several buckets at bucket_cap_mb=0.001, got %d" % nb
    for b in buckets:
        assert b == {"buckets_in_backward": nb, "buckets": nb}, \
            "every bucket's allreduce must start from a hook during backward: %r" % b
    return worst


def train_no_sync(wrap, rank):
    m = wrap(model(MLP, rank))
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    for s in range(10):
        opt.zero_grad()
        with m.no_sync():
            for k in range(2):
                x, y = data(rank, 100 + 3 * s + k)
                F.cross_entropy(m(x), y).backward()
        x, y = data(rank, 100 + 3 * s + 2)
        F.cross_entropy(m(x), y).backward()
        opt.step()
    return m


def check_no_sync(rank):
    th = train_no_sync(lambda mod: torch.nn.parallel.DistributedDataParallel(mod), rank)
    hv = train_no_sync(lambda mod: HvDDP(mod, bucket_cap_mb=0.001), rank)
    # Under no_sync the ranks' gradients differ: were they reduced, rank 1 would match.
    return compare("no_sync", hv, th)


def which(rank, s):
    if s % 4 == 3:
        return "b"  # head_a unused on every rank this step
    return "a" if (s + rank) % 2 == 0 else "b"  # each head used on one rank only


def train_unused(wrap, rank):
    m = wrap(model(Branchy, rank))
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    none_pattern = []
    for s in range(STEPS):
        x, y = data(rank, 200 + s)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x, which(rank, s)), y).backward()
        none_pattern.append(tuple(p.grad is None for p in m.parameters()))
        opt.step()
    return m, none_pattern


def check_unused(rank):
    th, th_none = train_unused(
        lambda mod: torch.nn.parallel.DistributedDataParallel(mod, find_unused_parameters=True),
        rank)
    hv, hv_none = train_unused(lambda mod: HvDDP(mod, find_unused_parameters=True,
                                                 bucket_cap_mb=0.001), rank)
    assert hv_none == th_none, "which .grad are None differs from torch DDP:\n%r\n%r" % (
        hv_none, th_none)
    names = [n for n, _ in hv.named_parameters()]
    never = [i for i, n in enumerate(names) if ".never." in n]
    assert never and all(all(pat[i] for i in never) for pat in hv_none), \
        "a layer no forward uses must keep .grad None"
    head_a = [i for i, n in enumerate(names) if ".head_a." in n]
    assert any(pat[head_a[0]] for pat in hv_none) and not all(pat[head_a[0]] for pat in hv_none)
    return compare("unused", hv, th)


def check_refusals(rank):
    m = model(Branchy, rank)
    ddp = HvDDP(m)
    x, y = data(rank, 0)
    loss = F.cross_entropy(ddp(x, "a"), y)
    expect_raises(RuntimeError, loss.backward, contains="head_b.weight, head_b.bias, never.weight")
    # The wrapper goes on: the next step with find_unused_parameters-free usage is refused the
    # same way, and a model that uses everything trains.
    mlp = HvDDP(model(MLP, rank))
    F.cross_entropy(mlp(x), y).backward()
    for kw, word in ((dict(process_group=object()), "process_group"),
                     (dict(mixed_precision=object()), "mixed_precision")):
        expect_raises(NotImplementedError, HvDDP, model(MLP, rank), contains=word, **kw)
    expect_raises(TypeError, HvDDP, model(MLP, rank), no_such_option=1, contains="no_such_option")
    expect_raises(ValueError, HvDDP, model(MLP, rank), device_ids=[0], contains="device_ids")
    expect_raises(NotImplementedError, mlp.register_comm_hook, None, None,
                  contains="register_comm_hook")
    expect_raises(NotImplementedError, mlp.join, contains="join")
    # Accepted as torch's: the global process set, gradient_as_bucket_view, static_graph.
    HvDDP(model(MLP, rank), process_group=hvd.global_process_set,
          gradient_as_bucket_view=True, static_graph=True)
    sd = mlp.state_dict()
    assert all(k.startswith("module.") for k in sd), sorted(sd)
    mlp.load_state_dict(sd)
    assert mlp.module is not None and isinstance(mlp.module, MLP)
    from hv.torch import parallel
    assert parallel.is_initialized() and parallel.get_rank() == hvd.rank()
    assert parallel.get_world_size() == hvd.size()
    parallel.barrier()


def scenario_ddp():
    hvd.init()
    rank = hvd.rank()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.environ["HV_DDP_STORE"],
                            rank=rank, world_size=hvd.size())
    errs = dict(numerics=check_numerics(rank), no_sync=check_no_sync(rank),
                unused=check_unused(rank))
    check_refusals(rank)
    if rank == 0:
        print("ddp: hv DDP against torch DDP-Gloo after %d steps, largest relative "
              "difference: %s" % (STEPS, ", ".join("%s %.3g" % kv for kv in errs.items())),
              flush=True)
    dist.destroy_process_group()
    hvd.shutdown()


SCENARIOS = {"ddp": scenario_ddp}
