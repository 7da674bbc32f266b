"""horovod_cases.py: the scenarios of torch_test.py that check hv.torch against Horovod's API
(issue 27), kept apart from torch_test.py's own. Each scenario_* runs in every rank's process
(torch_test.py launches them; 2 ranks meeting through HV_RDZV_DIR, no head):

  sampler  hv.torch.elastic.ElasticSampler as Horovod's (a DataLoader, record_batch, commit,
           len, set_epoch, state_dict/load_state_dict, restore) and exact: every sample once
           per epoch; its partition for 1 to 5 ranks (every rank the same number of batches,
           duplicates only where that cannot be had otherwise); hv's StepSampler behind
           ElasticSampler(..., batch_size=N) and its clear refusals of Horovod's methods
  state    hvd.elastic.ObjectState, a State subclass written as for Horovod, TorchState with
           Python objects: synced from rank 0 by run, committed, restored
  collectives  grouped_allreduce (all four forms, scaling, fp16), allgather_async (polled) and
           grouped_allgather, alltoall with and without splits, reducescatter (Horovod's split of
           rows), join with uneven data (zeros from the joined rank, the last rank, unnamed
           calls after it, a broadcast refused while a rank is joined), cross_rank and friends,
           process sets and the calls hv has not: clear errors; every public name of
           horovod.torch exists in hv.torch
  optimizer  DistributedOptimizer's options against the plain one (gradient_predivide_factor,
           groups as a number and as lists, sparse_as_dense), its refusals (Adasum, sparse
           without sparse_as_dense, process sets), join in the middle of training;
           SyncBatchNorm against BatchNorm over the whole batch in one process (outputs,
           gradients, running statistics)
"""

import torch
import torch.utils.data

import hv.torch as hvd
from hv.torch import elastic
from hv.torch.elastic import sampler as sampler_mod
from torch_test import expect_raises


def everyone(x):
    """Every rank's x, in rank order."""
    return hvd.allgather_object(x)


def check_partition():
    """The pass of every rank of a world of n, computed here for n = 1..5 (the partition is a
    pure function of the committed position, the batch size and the world)."""
    real = sampler_mod._world
    try:
        for n_samples, done, batch in ((50, 0, 4), (50, 13, 4), (7, 0, 0), (9, 1, 4),
                                       (17, 0, 8), (16, 0, 8), (3, 0, 2)):
            for n in range(1, 6):
                s = elastic.ElasticSampler(list(range(n_samples)), shuffle=True, seed=3)
                s._done[s._order()[:done]] = 1
                s._pos[1] = batch
                passes = []
                for r in range(n):
                    sampler_mod._world = lambda r=r, n=n: (r, n)
                    passes.append(list(s))
                    assert len(s) == len(passes[-1])
                left = n_samples - done
                got = [i for p in passes for i in p]
                assert set(got) == set(int(i) for i in s._remaining()), (n, passes)
                assert len({len(p) for p in passes}) == 1 or (
                    batch and len({(len(p) + batch - 1) // batch for p in passes}) == 1), passes
                dups = len(got) - left
                base, extra = divmod(left, n)
                want = 0 if extra == 0 or (batch and base % batch) else n - extra
                assert dups == want, (n_samples, done, batch, n, dups, want, passes)
    finally:
        sampler_mod._world = real


def scenario_sampler():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check_partition()

    # hv's step sampler where a batch size is given (hv's earlier ElasticSampler), with clear
    # refusals of Horovod's methods; Horovod's ElasticSampler otherwise.
    steps = elastic.ElasticSampler(list(range(10)), batch_size=4)
    assert isinstance(steps, elastic.StepSampler), type(steps)
    expect_raises(TypeError, steps.record_batch, 0, 4, contains="ElasticSampler(dataset")
    data = torch.arange(50)
    dataset = torch.utils.data.TensorDataset(data)
    s = elastic.ElasticSampler(dataset, shuffle=True, seed=11)
    assert type(s) is elastic.ElasticSampler
    assert len(s) == 25 and s.num_replicas == size and s.rank == rank
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, sampler=s)
    assert len(loader) == 7
    state = elastic.TorchState(sampler=s, epoch=0, batch=0)
    expect_raises(TypeError, setattr, state, "sampler", s.__class__(dataset),
                  contains="registered by memory")

    @elastic.run
    def train(state, epochs):
        seen = {}
        while state.epoch < epochs:
            mine = []
            for state.batch, (x,) in enumerate(loader, start=state.batch):
                mine += x.tolist()
                state.sampler.record_batch(state.batch, 4)
                if state.batch % 2 == 1:
                    state.commit()
            seen[state.epoch] = sorted(i for r in everyone(mine) for i in r)
            st = state.sampler.stats()
            assert st["processed"] == 50 or state.batch % 2 == 0, st
            state.epoch += 1
            state.batch = 0
            state.sampler.set_epoch(state.epoch)
            state.commit()
        return seen

    seen = train(state, 2)
    assert seen == {0: list(range(50)), 1: list(range(50))}, seen

    # A commit holds every rank's recorded samples; a restore goes back to it, and the next
    # pass hands out again exactly what was not committed (also what was recorded after).
    it = iter(loader)
    first = next(it)[0].tolist()
    s.record_batch(0, 4)
    state.commit()
    assert s.stats()["processed"] == 8 and s.stats()["epoch"] == 2, s.stats()
    assert len(s) == 21, len(s)
    second = next(it)[0].tolist()
    s.record_batch(1, 4)
    state.restore()
    assert s.stats()["processed"] == 8
    again = [i for b in loader for i in b[0].tolist()]
    assert not set(first) & set(again) and set(second) <= set(again), (first, second, again)
    assert sorted(i for r in everyone(first + again) for i in r) == list(range(50))

    # set_epoch to the epoch the sampler is in keeps what was processed; another one resets.
    s.set_epoch(2)
    assert s.stats()["processed"] == 8
    d = s.state_dict()
    assert d["epoch"] == 2 and len(d["processed_indices"]) == 8 and d["processed_num"] == 8, d
    s.set_epoch(3)
    assert s.stats() == {"epoch": 3, "processed": 0, "duplicates": 0, "remaining": 50,
                         "checksum": 0}, s.stats()
    s.load_state_dict(d)
    assert s.stats()["processed"] == 8 and s.epoch == 2 and len(s) == 21
    assert set(s.processed_indices) == set(d["processed_indices"])
    s.load_state_dict({"epoch": 4, "processed_num": 10})  # Horovod >= 0.23's form
    assert s.stats()["processed"] == 10 and set(s.remaining_indices) == set(
        s._order()[10:].tolist())
    expect_raises(ValueError, s.record_indices, [50], contains="outside the dataset")
    p = list(s)
    assert s.get_indices(0, 4) == p[:4]
    # DataLoader workers prefetch batches; record_batch still records the batch just trained.
    for (x,) in torch.utils.data.DataLoader(dataset, batch_size=4, sampler=s, num_workers=1):
        s.record_batch(0, 4)
        assert s._pending[-x.numel():] == x.tolist(), (s._pending, x)
    hvd.shutdown()


class CountingState(elastic.State):
    """A state written as for Horovod: its own save, restore and sync."""

    def __init__(self, value):
        super().__init__(bcast_object=hvd.broadcast_object, get_rank=hvd.rank)
        self.value = value
        self.saved = value
        self.calls = []

    def save(self):
        self.saved = self.value
        self.calls.append("save")

    def restore(self):
        self.value = self.saved
        self.calls.append("restore")

    def sync(self):
        self.value = self.saved = hvd.broadcast_object(self.value, 0)
        self.calls.append("sync")


def scenario_state():
    hvd.init()
    rank = hvd.rank()
    # ObjectState: ints and floats in libhv, other objects pickled; synced from rank 0 by run.
    obj = elastic.ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank,
                              epoch=rank, lr=0.5 * (rank + 1), history=["r%d" % rank],
                              flag=bool(rank))

    @elastic.run
    def first(state):
        assert (state.epoch, state.lr, state.history, state.flag) == (0, 0.5, ["r0"], False), \
            (state.epoch, state.lr, state.history, state.flag)
        state.epoch, state.history = 1, state.history + ["e1"]
        state.commit()
        state.epoch, state.history = 2, ["lost"]
        state.restore()
        return (state.epoch, state.history)

    assert first(obj) == (1, ["r0", "e1"])
    expect_raises(TypeError, setattr, obj, "epoch", 1.5, contains="whole numbers")
    expect_raises(AttributeError, getattr, obj, "nothing")

    # A State subclass written for Horovod: run syncs it first, commit saves it.
    cs = CountingState(value=10 + rank)

    @elastic.run
    def second(state):
        assert state.value == 10, state.value
        state.value = 20
        state.commit()
        return state.calls

    assert second(cs) == ["sync", "save"], cs.calls
    expect_raises(TypeError, elastic.run(lambda s: None), object(), contains="elastic state")

    # TorchState keeps Python objects beside the tensors.
    model = torch.nn.Linear(2, 2)
    ts = elastic.TorchState(model=model, optimizer=None, epoch=0, meta={"rank": rank})

    @elastic.run
    def third(state):
        assert state.meta == {"rank": 0} and state.optimizer is None, state.meta
        return "ok"

    assert third(ts) == "ok"
    hvd.shutdown()


# horovod.torch's public names (horovod/torch/__init__.py, Horovod 0.28): each must exist.
HOROVOD_NAMES = """elastic Compression allgather_object broadcast_object broadcast_optimizer_state
broadcast_parameters allreduce allreduce_async allreduce_ allreduce_async_ grouped_allreduce
grouped_allreduce_async grouped_allreduce_ grouped_allreduce_async_ sparse_allreduce_async
allgather allgather_async grouped_allgather grouped_allgather_async broadcast broadcast_async
broadcast_ broadcast_async_ alltoall alltoall_async reducescatter reducescatter_async
grouped_reducescatter grouped_reducescatter_async join barrier poll synchronize init shutdown
is_initialized start_timeline stop_timeline size local_size cross_size rank local_rank
cross_rank mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built
ddl_built ccl_built cuda_built rocm_built ProcessSet global_process_set add_process_set
remove_process_set Average Sum Adasum Min Max Product HorovodInternalError
DistributedOptimizer SyncBatchNorm""".split()


def scenario_collectives():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    missing = [n for n in HOROVOD_NAMES if not hasattr(hvd, n)]
    assert not missing, missing
    for n in ("TorchState", "ObjectState", "State", "ElasticSampler", "run"):
        assert hasattr(hvd.elastic, n), n
    # grouped allreduce, all four forms
    ts = [torch.full((3,), float(rank + 1)), torch.arange(5.0) * (rank + 1)]
    out = hvd.grouped_allreduce(ts, op=hvd.Sum)
    assert out[0].tolist() == [3.0] * 3 and out[1].tolist() == [0.0, 3.0, 6.0, 9.0, 12.0], out
    assert ts[0].tolist() == [float(rank + 1)] * 3  # inputs untouched
    out = hvd.grouped_allreduce(ts, compression=hvd.Compression.fp16)
    assert out[0].dtype == torch.float32 and out[0].tolist() == [1.5] * 3, out
    h = hvd.grouped_allreduce_async(ts, name="ga", prescale_factor=2.0, postscale_factor=0.5)
    assert [t.tolist() for t in hvd.synchronize(h)] == [[1.5] * 3, [0.0, 1.5, 3.0, 4.5, 6.0]]
    same = hvd.grouped_allreduce_([t.clone() for t in ts], op=hvd.Max)
    assert same[0].tolist() == [2.0] * 3
    h = hvd.grouped_allreduce_async_([ts[0][::2].clone(), ts[1][::2]], op=hvd.Sum)  # strided
    got = hvd.synchronize(h)
    assert got[1].tolist() == [0.0, 6.0, 12.0] and ts[1].tolist()[::2] == [0.0, 6.0, 12.0], got
    # allgather_async (dim 0 differs), polled; grouped allgather
    h = hvd.allgather_async(torch.full((rank + 1, 2), float(rank)), name="ag")
    while not hvd.poll(h):
        pass
    g = hvd.synchronize(h)
    assert g.tolist() == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]], g
    g = hvd.grouped_allgather([torch.tensor([rank]), torch.ones(1, 2) * rank])
    assert g[0].tolist() == [0, 1] and g[1].shape == (2, 2), g
    bad = hvd.allgather_async(torch.zeros(1, rank + 1))
    expect_raises(hvd.MismatchError, hvd.synchronize, bad, contains="dimensions after the first")
    # alltoall: rank r sends r + 1 rows to rank 0 and 1 row to rank 1
    x = torch.arange(float(rank + 2)).view(-1, 1) + 10 * rank
    o, rs = hvd.alltoall(x, splits=[rank + 1, 1])
    want = ({0: [[0.0], [10.0], [11.0]], 1: [[1.0], [12.0]]})[rank]
    assert o.tolist() == want and rs.tolist() == ([1, 2] if rank == 0 else [1, 1]), (o, rs)
    o = hvd.alltoall(torch.arange(4.0) + 4 * rank)
    assert o.tolist() == ([0.0, 1.0, 4.0, 5.0] if rank == 0 else [2.0, 3.0, 6.0, 7.0]), o
    expect_raises(ValueError, hvd.alltoall, torch.arange(3.0), contains="not a multiple")
    # reducescatter: 5 rows over 2 ranks: 3 and 2 (Horovod's split)
    r = hvd.reducescatter(torch.arange(10.0).view(5, 2) * (rank + 1), op=hvd.Sum)
    assert r.tolist() == ([[0.0, 3.0], [6.0, 9.0], [12.0, 15.0]] if rank == 0 else
                          [[18.0, 21.0], [24.0, 27.0]]), r
    r = hvd.reducescatter(torch.ones(4, 1) * (rank + 1))
    assert r.tolist() == [[1.5], [1.5]], r
    r = hvd.grouped_reducescatter([torch.ones(2), torch.ones(2, 2)], op=hvd.Sum)
    assert r[0].tolist() == [2.0] and r[1].tolist() == [[2.0, 2.0]], r
    # join: rank 0 has 1 step of data, rank 1 has 3; rank 0 contributes zeros meanwhile
    for step in range(1 + 2 * rank):
        v = hvd.allreduce(torch.full((4,), float(rank + 1)), name="j.grad")
        assert v.tolist() == [(3.0 if step == 0 else 2.0) / 2] * 4, (step, v)
        hvd.allreduce(torch.ones(1))  # unnamed: the joined rank's sequence falls behind
        hvd.synchronize(hvd.allreduce_async(torch.ones(1)))  # hv.torch's unnamed async too
    assert hvd.join() == 1
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == 2.0  # names agree again
    assert hvd.synchronize(hvd.allreduce_async(torch.ones(1), op=hvd.Sum)).item() == 2.0
    if rank == 1:
        e = expect_raises(hvd.HvError, hvd.broadcast, torch.ones(1), 1, contains="joined")
        assert e.errname == "HV_ENOTSUP", e.errname
    assert hvd.join() in (0, 1)
    # hosts, process sets, what hv has not
    assert (hvd.cross_rank(), hvd.cross_size(), hvd.is_homogeneous()) == (0, 1, True)
    assert hvd.mpi_built() is False and hvd.gloo_built() is False
    assert hvd.add_process_set(list(range(size))) is hvd.global_process_set
    expect_raises(NotImplementedError, hvd.add_process_set, [0], contains="process sets")
    expect_raises(NotImplementedError, hvd.allreduce, torch.ones(1),
                  process_set=hvd.ProcessSet([0]), contains="process sets")
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum,
                         process_set=hvd.global_process_set).item() == 2.0
    expect_raises(NotImplementedError, hvd.allreduce, torch.ones(1), op=hvd.Adasum,
                  contains="Adasum")
    expect_raises(NotImplementedError, hvd.start_timeline, "t.json", contains="timeline")
    expect_raises(NotImplementedError, hvd.sparse_allreduce_async, torch.ones(1), "s", hvd.Sum,
                  contains="sparse_as_dense")
    expect_raises(NotImplementedError, hvd.init, comm=[0, 1], contains="MPI communicator")
    hvd.shutdown()


def small_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def train_steps(make_opt, steps, rank, seed=3):
    """Parameters after `steps` steps of SGD on rank-dependent data through make_opt(model)."""
    model = small_model(seed)
    opt = make_opt(model)
    for s in range(steps):
        g = torch.Generator().manual_seed(100 * s + rank)
        x, y = torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def scenario_optimizer():
    hvd.init()
    rank = hvd.rank()

    def dist(**kw):
        return lambda m: hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                                  named_parameters=m.named_parameters(), **kw)

    base = train_steps(dist(), 3, rank)
    for kw in ({"gradient_predivide_factor": 4.0}, {"groups": 2}, {"num_groups": 1}):
        got = train_steps(dist(**kw), 3, rank)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(base, got)), kw

    def listed(m):
        ps = list(m.parameters())
        return hvd.DistributedOptimizer(torch.optim.SGD(ps, lr=0.1),
                                        named_parameters=m.named_parameters(),
                                        groups=[[ps[0], ps[3]], [ps[1]]])
    got = train_steps(listed, 3, rank)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(base, got))
    expect_raises(NotImplementedError, dist(op=hvd.Adasum), small_model(1), contains="Adasum")
    expect_raises(ValueError, dist(op=hvd.Sum, gradient_predivide_factor=2.0), small_model(1),
                  contains="op=Average")
    expect_raises(NotImplementedError, dist(process_set=hvd.ProcessSet([0])), small_model(1),
                  contains="process sets")
    # sparse gradients: refused with the option to use, then reduced as dense
    for dense in (False, True):
        emb = torch.nn.Embedding(10, 3, sparse=True)
        torch.nn.init.constant_(emb.weight, 1.0)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                       named_parameters=emb.named_parameters(),
                                       sparse_as_dense=dense)
        loss = emb(torch.tensor([rank, 2])).sum()
        if not dense:
            expect_raises(TypeError, loss.backward, contains="sparse_as_dense=True")
            hvd.barrier()
            continue
        loss.backward()
        opt.step()
        w = emb.weight.detach()
        assert w[2].tolist() == [0.0] * 3 and w[0].tolist() == [0.5] * 3, w  # 2 used twice
    # join in the middle of training: rank 0 runs out of data after 1 step, rank 1 does 2;
    # rank 0's gradients are zeros in step 2 (Average divides by 2)
    model = small_model(5)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters())
    for s in range(1 + rank):
        before = [p.detach().clone() for p in model.parameters()]
        opt.zero_grad()
        # This rank's own gradients, as backward computes them (p.grad may already hold the
        # reduced ones when backward returns: the hooks reduce in place while it runs).
        raw = {}
        hooks = [p.register_hook(lambda g, i=i: raw.__setitem__(i, g.clone()))
                 for i, p in enumerate(model.parameters())]
        model(torch.ones(1, 4) * (s + 1)).sum().backward()
        for h in hooks:
            h.remove()
        mine = [raw[i] for i in range(len(raw))]
        opt.step()
    assert hvd.join() == 1
    if rank == 1:  # its last step was averaged with rank 0's zeros: half its own gradient
        for p, q, g in zip(model.parameters(), before, mine):
            assert torch.allclose(q - p.detach(), g / 2, atol=1e-6), (q - p, g)
    # SyncBatchNorm against BatchNorm over the whole batch (both ranks' halves) in one process
    torch.manual_seed(9)
    full = torch.randn(6, 3, 4)
    mine = full[3 * rank:3 * rank + 3].clone().requires_grad_()
    whole = full.clone().requires_grad_()
    sbn, bn = hvd.SyncBatchNorm(3), torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        for m in (sbn, bn):
            m.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
            m.bias.copy_(torch.tensor([0.0, -1.0, 1.0]))
    coef = torch.arange(72.0).view(6, 3, 4) / 72
    ys, yb = sbn(mine), bn(whole)
    assert torch.allclose(ys, yb[3 * rank:3 * rank + 3], atol=1e-5)
    (ys * coef[3 * rank:3 * rank + 3]).sum().backward()
    (yb * coef).sum().backward()
    assert torch.allclose(mine.grad, whole.grad[3 * rank:3 * rank + 3], atol=1e-5)
    assert torch.allclose(hvd.allreduce(sbn.weight.grad, op=hvd.Sum), bn.weight.grad, atol=1e-5)
    assert torch.allclose(sbn.running_mean, bn.running_mean, atol=1e-6)
    assert torch.allclose(sbn.running_var, bn.running_var, atol=1e-6)
    sbn.eval()
    bn.eval()
    assert torch.allclose(sbn(full), bn(full), atol=1e-6)
    hvd.shutdown()


SCENARIOS = {"sampler": scenario_sampler, "state": scenario_state,
             "collectives": scenario_collectives, "optimizer": scenario_optimizer}
