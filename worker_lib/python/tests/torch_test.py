#!/usr/bin/python3
"""torch_test.py: unit tests of hv.torch (the Python binding of libhv) with real processes.

    torch_test.py --pypath DIR SCENARIO     the launcher: spawns the scenario's ranks (each this
                                            file with --worker), meeting through a temporary
                                            HV_RDZV_DIR, and reports PASS / FAIL
Scenarios:
  loader     one process: where libhv is looked for and the errors when it is missing, calls
             before init
  api        2 ranks: every call, every dtype against a reference sum, non-contiguous tensors,
             DistributedOptimizer against single-process training, misuse (wrong kinds and
             dtypes, ranks disagreeing on a size under one name), the GIL released in a call
  peer_gone  2 ranks: rank 1 is SIGKILLed; rank 0's allreduce raises HvInternalError (bounded)
             and the interpreter lives on
  elastic    2 ranks, no head: hv.torch.elastic's TorchState (model, optimizer, scalars) synced
             from rank 0 by run, commit and restore, exceptions through run
  sampler, state, collectives, optimizer
             2 ranks: Horovod's API (issue 27), in horovod_cases.py (its docstring)
  ddp        2 ranks: hv.torch.parallel.DistributedDataParallel against torch's DDP over Gloo
             in the same processes (issue 27), in ddp_cases.py (its docstring)
  cuda       2 ranks on the CPU stand-in for CUDA/NCCL (tests/gpusim; HV_TEST_GPUSIM names
             libhv_gpusim.so, preloaded into the workers with 2 "devices"; skip without it):
             stand-ins for CUDA tensors (is_cuda True, data_ptr in the stand-in's device memory;
             Debian's torch has no CUDA) through allreduce_, broadcast_, allreduce_async_ and
             DistributedOptimizer's path, on the stream hv.torch takes from torch
Exit 77 (skip) when /usr/bin/python3 cannot import torch, or when HV_TEST_SANITIZE is set (a
sanitizer build whose runtimes could not be found). In the sanitizer build CMake sets
HV_TEST_PRELOAD to GCC's libasan and libubsan, which the workers get as LD_PRELOAD (an
uninstrumented python can load an instrumented libhv.so only that way), leak detection off.
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

TIMEOUT_S = 45 * float(os.environ.get("HV_TEST_TIMEOUT_MULTIPLIER", "1"))
RANKS = {"loader": 0, "api": 2, "peer_gone": 2, "elastic": 2, "cuda": 2, "sampler": 2,
         "state": 2, "collectives": 2, "optimizer": 2, "ddp": 2}


# ---- the launcher ------------------------------------------------------------------------------

def launch(scenario, pypath):
    if os.environ.get("HV_TEST_SANITIZE"):
        print("SKIP: sanitizer build: its libhv.so needs the ASan runtime preloaded into python; "
              "the Python tests run in the plain build")
        return 77
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        print("SKIP: %s cannot import torch (%s); install python3-torch "
              "(deploy/install-deps.sh)" % (sys.executable, exc))
        return 77
    pypath = os.path.abspath(pypath)
    env = dict(os.environ, PYTHONPATH=pypath, HV_LOG_LEVEL=os.environ.get("HV_LOG_LEVEL", "3"))
    if os.environ.get("HV_TEST_PRELOAD"):
        # The sanitizer build: the workers load an instrumented libhv.so, so they need the
        # sanitizer runtimes first; python's own memory is not freed at exit (no leak check).
        env["LD_PRELOAD"] = os.environ["HV_TEST_PRELOAD"]
        env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    if scenario == "cuda":
        gpusim = os.environ.get("HV_TEST_GPUSIM", "")
        if not os.path.isfile(gpusim):
            print("SKIP: cuda needs HV_TEST_GPUSIM (the build's lib/libhv_gpusim.so, built where "
                  "the CUDA and NCCL headers are found)")
            return 77
        env["LD_PRELOAD"] = (env.get("LD_PRELOAD", "") + " " + gpusim).strip()
        env["HV_GPUSIM_DEVICES"] = "2"
    n = RANKS[scenario]
    me = os.path.abspath(__file__)
    if n == 0:
        rc = subprocess.call([sys.executable, me, "--worker", scenario], env=env,
                             timeout=TIMEOUT_S)
        print("PASS" if rc == 0 else "FAIL: %s exited %d" % (scenario, rc))
        return 0 if rc == 0 else 1
    with tempfile.TemporaryDirectory(prefix="hv-pytest-") as rdzv:
        procs = []
        for r in range(n):
            e = dict(env, HV_RDZV_DIR=rdzv, HV_RANK=str(r), HV_SIZE=str(n), HV_LOCAL_RANK=str(r),
                     HV_LOCAL_SIZE=str(n))
            if scenario == "ddp":  # torch's DDP over Gloo beside hv's: a FileStore, loopback
                e.update(HV_DDP_STORE=os.path.join(rdzv, "gloo.store"), GLOO_SOCKET_IFNAME="lo")
            procs.append(subprocess.Popen([sys.executable, me, "--worker", scenario], env=e))
        expected = {r: 0 for r in range(n)}
        if scenario == "peer_gone":
            expected[1] = -signal.SIGKILL
        # ddp runs torch's DDP over Gloo beside hv's: twice the start-up (ctest gives it 120 s).
        limit = TIMEOUT_S * (2 if scenario == "ddp" else 1)
        deadline = time.monotonic() + limit
        failed = None
        while time.monotonic() < deadline and failed is None:
            if all(p.poll() is not None for p in procs):
                break
            for r, p in enumerate(procs):
                if p.poll() is not None and p.returncode != expected[r]:
                    failed = "rank %d exited %d" % (r, p.returncode)
            time.sleep(0.05)
        else:
            if failed is None:
                failed = "timed out after %.0f s" % limit
        for p in procs:  # a failed rank leaves its peers waiting in a collective
            if p.poll() is None:
                p.kill()
            p.wait()
        for r, p in enumerate(procs):
            if failed is None and p.returncode != expected[r]:
                failed = "rank %d exited %d" % (r, p.returncode)
    if failed:
        print("FAIL: %s: %s" % (scenario, failed))
        return 1
    print("PASS")
    return 0


# ---- the workers -------------------------------------------------------------------------------

def expect_raises(exc_type, fn, *args, contains=None, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as exc:
        if contains is not None and contains not in str(exc):
            raise AssertionError("%s raised %r, which lacks %r" % (fn.__name__, exc, contains))
        return exc
    raise AssertionError("%s did not raise %s" % (fn.__name__, exc_type.__name__))


def scenario_loader():
    here = os.environ["PYTHONPATH"]
    env = dict(os.environ, HV_LIBRARY="/nonexistent/libhv.so")
    r = subprocess.run([sys.executable, "-c", "import hv"], env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0 and "HV_LIBRARY=/nonexistent/libhv.so (no such file)" in r.stderr, \
        r.stderr
    # Without HV_LIBRARY and without a libhv.so beside the package: every place tried is named.
    with tempfile.TemporaryDirectory() as d:
        pkg = os.path.join(d, "hv")
        os.mkdir(pkg)
        for f in ("__init__.py", "_lib.py", "_node.py", "errors.py"):
            os.symlink(os.path.join(here, "hv", f), os.path.join(pkg, f))
        env = {k: v for k, v in os.environ.items() if k not in ("HV_LIBRARY", "LD_LIBRARY_PATH")}
        env["PYTHONPATH"] = d
        r = subprocess.run([sys.executable, "-c", "import hv"], env=env, capture_output=True,
                           text=True)
        for want in ("HV_LIBRARY (unset)", os.path.join(pkg, "libhv.so") + " (no such file)",
                     "libhv.so.0 on the loader path"):
            assert r.returncode != 0 and want in r.stderr, (want, r.returncode, r.stderr, r.stdout)
    import torch
    import hv
    import hv.torch as hvd
    assert hv.library_path.endswith("libhv.so") and hv.version().count(".") == 2
    for fn in (hvd.size, hvd.rank, hvd.local_rank, hvd.local_size):
        expect_raises(hvd.NotInitializedError, fn, contains="init()")
    e = expect_raises(hvd.NotInitializedError, hvd.allreduce, torch.ones(4))
    assert isinstance(e, ValueError) and e.errname == "HV_ESTATE"
    expect_raises(hvd.NotInitializedError, hvd.broadcast_, torch.ones(4), 0)
    m = torch.nn.Linear(2, 2)
    expect_raises(hvd.NotInitializedError, hvd.DistributedOptimizer,
                  torch.optim.SGD(m.parameters(), lr=0.1), named_parameters=m.named_parameters())
    hvd.shutdown()  # harmless before init
    hvd.init()  # a world of one
    hvd.init()  # again: nothing
    assert (hvd.size(), hvd.rank()) == (1, 0)
    assert hvd.allreduce(torch.arange(5.0)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert hvd.allreduce(torch.zeros(0)).numel() == 0  # empty tensors are fine
    assert hvd.broadcast(torch.zeros(0, 3), 0).shape == (0, 3)
    assert hvd.allgather(torch.tensor(7.0)).tolist() == [7.0]  # a scalar gathers as one row
    hvd.shutdown()
    expect_raises(hvd.NotInitializedError, hvd.allreduce_, torch.ones(2))


def base(k, n, dtype):
    """Rank k's input: small integers, so every sum and average is exact in every dtype."""
    import torch
    return ((torch.arange(n) % 7) + k * 3).to(dtype)


def check_dtypes(hvd, torch, rank, size):
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                  torch.int64, torch.uint8):
        for n in (1, 1000, 300_001):
            mine = base(rank, n, dtype)
            ref_sum = sum(base(k, n, torch.float64) for k in range(size))
            out = hvd.allreduce(mine, op=hvd.Sum)
            assert out.dtype == dtype and torch.equal(out.double(), ref_sum), (dtype, n)
            assert torch.equal(mine, base(rank, n, dtype)), "allreduce changed its input"
            ref_max = torch.stack([base(k, n, torch.float64) for k in range(size)]).max(0).values
            assert torch.equal(hvd.allreduce(mine, op=hvd.Max).double(), ref_max)
            if dtype.is_floating_point:
                avg = hvd.allreduce(mine)  # Horovod's default: Average
                assert torch.equal(avg.double(), ref_sum / size), (dtype, n)
            t = mine.clone()
            assert hvd.allreduce_(t, op=hvd.Sum) is t and torch.equal(t.double(), ref_sum)
            t = mine.clone()
            h = hvd.allreduce_async_(t, name="dt.%s.%d" % (dtype, n), op=hvd.Sum)
            while not hvd.poll(h):
                time.sleep(0.001)
            assert hvd.synchronize(h) is t and torch.equal(t.double(), ref_sum)
            h = hvd.allreduce_async(mine, name="dto.%s.%d" % (dtype, n), op=hvd.Sum)
            assert torch.equal(hvd.synchronize(h).double(), ref_sum)
            expect_raises(ValueError, hvd.synchronize, h)  # spent


def check_layouts(hvd, torch, rank, size):
    # Non-contiguous: a transposed view and a strided slice, reduced in place and out of place.
    ref = sum(base(k, 64, torch.float32) for k in range(size)).view(8, 8)
    t = base(rank, 64, torch.float32).view(8, 8).t()
    assert not t.is_contiguous()
    assert torch.equal(hvd.allreduce(t, op=hvd.Sum), ref.t())
    assert hvd.allreduce_(t, op=hvd.Sum) is t and torch.equal(t, ref.t())
    big = base(rank, 64, torch.float64)
    view = big[::2]
    hvd.synchronize(hvd.allreduce_async_(view, name="strided", op=hvd.Sum))
    full_ref = sum(base(k, 64, torch.float64) for k in range(size))
    assert torch.equal(big[::2], full_ref[::2]) and torch.equal(big[1::2],
                                                                base(rank, 64,
                                                                     torch.float64)[1::2])
    # Named blocking calls, pre/post scale, fp16 compression.
    x = torch.full((10,), float(rank + 1))
    assert torch.equal(hvd.allreduce(x, name="named.sum", op=hvd.Sum), torch.full((10,), 3.0))
    # Named blocking calls (hv_allreduce_named, hv_broadcast_named) match by name: rank 0 runs
    # them before its async call, the others with theirs in flight; non-contiguous too.
    tot = float(size * (size + 1) // 2)
    a = torch.full((6,), float(rank + 1))
    nb = torch.full((4, 4), float(rank + 1)).t()
    bc = torch.full((3, 2), float(rank)).t()
    if rank == 0:
        assert hvd.allreduce_(nb, name="nb.blocking", op=hvd.Sum) is nb
        assert hvd.broadcast_(bc, 1 % size, name="nb.bcast") is bc
        h = hvd.allreduce_async_(a, name="nb.async", op=hvd.Sum)
    else:
        h = hvd.allreduce_async_(a, name="nb.async", op=hvd.Sum)
        assert hvd.allreduce_(nb, name="nb.blocking", op=hvd.Sum) is nb
        assert hvd.broadcast_(bc, 1 % size, name="nb.bcast") is bc
    assert hvd.synchronize(h) is a and torch.equal(a, torch.full((6,), tot))
    assert torch.equal(nb, torch.full((4, 4), tot))
    assert torch.equal(bc, torch.full((2, 3), float(1 % size)))
    assert torch.equal(hvd.broadcast(x, 0, name="nb.bcast.new"), torch.full((10,), 1.0))
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5),
                       torch.full((10,), 3.0))
    c = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert c.dtype == torch.float32 and torch.equal(c, torch.full((10,), 3.0))


def check_broadcast_gather(hvd, torch, rank, size):
    for root in range(size):
        t = torch.full((5, 3), float(rank))
        out = hvd.broadcast(t, root)
        assert torch.equal(out, torch.full((5, 3), float(root))) and t[0, 0] == rank
        assert hvd.broadcast_(t, root) is t and torch.equal(t, out)
        u = torch.full((4, 4), rank, dtype=torch.int64).t()
        hvd.synchronize(hvd.broadcast_async_(u, root, name="bc.%d" % root))
        assert torch.equal(u, torch.full((4, 4), root, dtype=torch.int64))
    # allgather: rank k gives k+1 rows.
    g = hvd.allgather(torch.full((rank + 1, 2), rank, dtype=torch.int32))
    want = torch.cat([torch.full((k + 1, 2), k, dtype=torch.int32) for k in range(size)])
    assert torch.equal(g, want), g
    e = expect_raises(hvd.MismatchError, hvd.allgather, torch.zeros(2, rank + 1),
                      contains="dimensions after the first")
    assert isinstance(e, ValueError)
    expect_raises(hvd.MismatchError, hvd.allgather, torch.zeros([2] * (rank + 1)),
                  contains="numbers of dimensions")
    assert hvd.broadcast_object({"r": rank, "l": [1, 2]}, root_rank=1) == {"r": 1, "l": [1, 2]}
    assert hvd.allgather_object(("x", rank)) == [("x", k) for k in range(size)]


def make_model(torch, seed):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(6, 16)
            self.fc2 = torch.nn.Linear(16, 3)
            self.unused = torch.nn.Linear(2, 2)  # not in the graph: reduced as zeros

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    torch.manual_seed(seed)
    return Net()


def batch(torch, k):
    g = torch.Generator().manual_seed(100 + k)
    return torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)


def check_optimizer(hvd, torch, rank, size):
    # broadcast_parameters: every rank starts from rank 0's weights.
    model = make_model(torch, seed=rank)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    ref = make_model(torch, seed=0)
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.equal(a, b)
    # broadcast_optimizer_state: rank 0 has momentum buffers and another lr, the others none.
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if rank == 0:
        x, y = batch(torch, 99)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        opt.param_groups[0]["lr"] = 0.05
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.05 and len(opt.state) == 4
    states = hvd.allgather_object({k: v["momentum_buffer"].tolist()
                                   for k, v in opt.state_dict()["state"].items()})
    assert all(s == states[0] for s in states)
    ref = make_model(torch, seed=0)
    ref.load_state_dict(model.state_dict())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    ref_opt.load_state_dict(opt.state_dict())
    # DistributedOptimizer against one process that sees every rank's batch.
    dopt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    assert isinstance(dopt, torch.optim.SGD)
    from hv.torch import optimizer as hv_optimizer
    group_bytes = hv_optimizer.GROUP_BYTES
    for step in range(4):
        x, y = batch(torch, 10 * step + rank)
        dopt.zero_grad()
        # Steps 0-1: the small gradients go as one group when backward ends; steps 2-3: every
        # gradient fills a group by itself and goes at once, during backward.
        hv_optimizer.GROUP_BYTES = group_bytes if step < 2 else 1
        torch.nn.functional.mse_loss(model(x), y).backward()
        # The gradients went to libhv during backward, not in step().
        assert len(dopt._submitted) == 4 and not dopt._ready, (dopt._submitted, dopt._ready)
        assert len(dopt._groups) == (1 if step < 2 else 4), len(dopt._groups)
        dopt.step()
        ref_opt.zero_grad()
        for k in range(size):
            xk, yk = batch(torch, 10 * step + k)
            (torch.nn.functional.mse_loss(ref(xk), yk) / size).backward()
        ref_opt.step()
        for (n, a), b in zip(model.named_parameters(), ref.parameters()):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (step, n, (a - b).abs().max())
    # backward_passes_per_step=2: two local backwards, one allreduce.
    m2 = make_model(torch, seed=0)
    o2 = hvd.DistributedOptimizer(torch.optim.SGD(m2.parameters(), lr=0.1),
                                  named_parameters=m2.named_parameters(),
                                  backward_passes_per_step=2, op=hvd.Sum)
    for p in range(2):
        x, y = batch(torch, 50 + p)
        torch.nn.functional.mse_loss(m2(x), y).backward()
        assert len(o2._submitted) == (0 if p == 0 else 4)
    expect_raises(AssertionError, o2.zero_grad)
    x, y = batch(torch, 52)
    expect_raises(Exception, lambda: torch.nn.functional.mse_loss(m2(x), y).backward(),
                  contains="backward_passes_per_step")
    o2.step()
    hv_optimizer.GROUP_BYTES = group_bytes
    # Misuse of the constructor.
    expect_raises(ValueError, hvd.DistributedOptimizer, torch.optim.SGD(m2.parameters(), lr=1),
                  named_parameters=[("a", p) for p in m2.parameters()], contains="duplicate")
    expect_raises(ValueError, hvd.DistributedOptimizer, torch.optim.SGD(m2.parameters(), lr=1),
                  named_parameters=list(m2.named_parameters())[:1], contains="lacks")


def check_misuse(hvd, torch, rank, size):
    import numpy
    for bad in ([1.0, 2.0], numpy.ones(3, dtype=numpy.float32), 3.0):
        expect_raises(TypeError, hvd.allreduce, bad, contains="expected a torch.Tensor")
    for dt in (torch.int8, torch.bool, torch.complex64, torch.int16):
        expect_raises(TypeError, hvd.allreduce, torch.zeros(3, dtype=dt),
                      contains="is not supported")
    expect_raises(TypeError, hvd.allreduce_, torch.zeros(3, device="meta"), contains="CPU")
    expect_raises(TypeError, hvd.broadcast_, torch.zeros(2, 2).to_sparse(), 0,
                  contains="dense tensors only")
    expect_raises(ValueError, hvd.allreduce, torch.ones(2), op=42)
    for bad_op in (42, -1, "sum", [0]):  # allreduce_'s inlined per-call path still checks
        expect_raises(ValueError, hvd.allreduce_, torch.ones(2), op=bad_op)
    expect_raises(ValueError, hvd.allreduce_, torch.ones(2), average=True, op=hvd.Sum)
    expect_raises(ValueError, hvd.allreduce, torch.ones(2), average=True, op=hvd.Sum)
    check_cuda_refused(hvd, torch)
    e = expect_raises(hvd.InvalidArgumentError, hvd.broadcast_, torch.ones(2), size + 3)
    assert e.errname == "HV_EINVAL"
    expect_raises(ValueError, hvd.synchronize, 123456789)
    # Two ranks disagree on a tensor's size under one name: both get MismatchError.
    e = expect_raises(hvd.MismatchError, hvd.allreduce, torch.ones(10 + rank), name="mismatch")
    assert e.errname == "HV_EPROTO" and isinstance(e, hvd.HvError), e
    # libhv's data plane is still usable after the refused operation.
    assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), 2.0))


class FakeCudaTensor:
    """What hv.torch reads of a CUDA tensor (Debian's torch cannot make one): is_cuda, device,
    dtype, layout, data_ptr, numel, is_contiguous. ptr is the memory behind it."""
    is_cuda = True
    is_cpu = False

    def __init__(self, torch, ptr, n, dtype, index=0):
        self.device = torch.device("cuda", index)
        self.dtype = dtype
        self.layout = torch.strided
        self._ptr, self._n = ptr, n

    def data_ptr(self):
        return self._ptr

    def numel(self):
        return self._n

    def is_contiguous(self):
        return True


def check_cuda_refused(hvd, torch):
    """Without a CUDA device (this process has none; or a libhv built without CUDA) a CUDA tensor
    is refused with a RuntimeError that names the fix; host memory is never read as device
    memory, and torch.cuda is never initialised."""
    from hv.torch import _ops
    host = torch.ones(4)
    fake = FakeCudaTensor(torch, host.data_ptr(), 4, torch.float32)
    built = bool(_ops._lib.hv_cuda_built())
    calls = (hvd.allreduce_, lambda t: hvd.broadcast_(t, 0),
             lambda t: hvd.allreduce_async_(t, name="cuda.refused"))
    for fn in calls:  # torch has no CUDA device either: it cannot name a stream
        expect_raises(RuntimeError, fn, fake,
                      contains="torch sees no CUDA device" if built else "built without CUDA")
    saved = _ops._cuda_built, _ops._current_stream
    try:
        _ops._current_stream = lambda device: 0  # a torch that answers: libhv still refuses
        for fn in calls:
            expect_raises(RuntimeError, fn, fake,
                          contains="libhv sees no CUDA device" if built else "built without CUDA")
        _ops._cuda_built = False  # what a libhv built without CUDA answers
        e = expect_raises(RuntimeError, hvd.allreduce_, fake, contains="built without CUDA")
        assert "HV_WITH_NCCL=ON" in str(e) and ".cpu()" in str(e), e
    finally:
        _ops._cuda_built, _ops._current_stream = saved
    assert torch.equal(host, torch.ones(4)), host
    assert not torch.cuda.is_initialized()


def scenario_cuda():
    """Fake CUDA tensors in the stand-in's device memory through hv.torch's CUDA path."""
    import ctypes
    import torch
    import hv.torch as hvd
    from hv.torch import _ops
    cuda = ctypes.CDLL(None)  # the preloaded stand-in's cudaMalloc, cudaMemcpy, cudaStream*
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    dev = ctypes.c_int(-1)
    assert cuda.cudaGetDevice(ctypes.byref(dev)) == 0 and dev.value == rank, dev.value
    stream = ctypes.c_void_p()
    assert cuda.cudaStreamCreate(ctypes.byref(stream)) == 0
    streams = []

    def current_stream(device):
        streams.append(device)
        return stream.value

    _ops._current_stream = current_stream
    n = 1000

    def make(values):
        p = ctypes.c_void_p()
        assert cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n * 4)) == 0
        put(p.value, values)
        return FakeCudaTensor(torch, p.value, n, torch.float32, rank)

    def put(ptr, values):
        assert cuda.cudaMemcpy(ctypes.c_void_p(ptr), ctypes.c_void_p(values.data_ptr()),
                               ctypes.c_size_t(n * 4), 4) == 0  # cudaMemcpyDefault

    def get(t):
        out = torch.empty(n)
        assert cuda.cudaMemcpy(ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(t.data_ptr()),
                               ctypes.c_size_t(n * 4), 4) == 0
        return out

    base_ = torch.arange(n, dtype=torch.float32)
    t = make(base_ + rank)
    assert hvd.allreduce_(t, op=hvd.Sum) is t
    assert torch.equal(get(t), base_ * size + sum(range(size))), get(t)[:4]
    put(t.data_ptr(), base_ * 3 if rank == 1 else torch.full((n,), -1.0))
    hvd.broadcast_(t, 1)
    assert torch.equal(get(t), base_ * 3)
    put(t.data_ptr(), torch.ones(n))
    h = hvd.allreduce_async_(t, name="cuda.grad", op=hvd.Average)
    assert hvd.synchronize(h) is t and torch.equal(get(t), torch.ones(n))
    # Every call asked for the stream on the tensor's device.
    assert streams == [torch.device("cuda", rank)] * 3, streams
    # The stream reaches libhv: one CUDA does not know fails its synchronisation (HV_EIO).
    _ops._current_stream = lambda device: ctypes.addressof(stream)
    e = expect_raises(hvd.HvError, hvd.allreduce_, t)
    assert e.errname == "HV_EIO", e
    _ops._current_stream = current_stream
    # Host memory presented as a CUDA tensor is refused by libhv (HV_EINVAL), not reduced.
    host = torch.ones(n)
    e = expect_raises(hvd.InvalidArgumentError, hvd.allreduce_,
                      FakeCudaTensor(torch, host.data_ptr(), n, torch.float32, rank))
    expect_raises(TypeError, hvd.allgather, t, contains="CPU tensors only")
    expect_raises(TypeError, hvd.allreduce_, FakeCudaTensor(torch, t.data_ptr(), n, torch.int8),
                  contains="is not supported")
    # The data plane still works after the refusals.
    assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), 2.0))
    assert not torch.cuda.is_initialized()
    hvd.shutdown()


def check_gil(hvd, torch, rank, size):
    # Rank 1 joins late, so rank 0 sits in libhv for ~1 s; a Python thread must keep running.
    ticks = [0]
    stop = threading.Event()

    def loader():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    th = threading.Thread(target=loader)
    th.start()
    hvd.barrier()
    if rank == 1:
        time.sleep(1.0)
    before, t0 = ticks[0], time.monotonic()
    out = hvd.allreduce(torch.ones(1 << 20), op=hvd.Sum)
    waited, ran = time.monotonic() - t0, ticks[0] - before
    print("gil: rank %d waited %.2f s, thread ran %d times" % (rank, waited, ran), file=sys.stderr)
    stop.set()
    th.join()
    assert torch.equal(out, torch.full((1 << 20,), 2.0))
    if rank == 0:
        assert waited > 0.5, waited
        assert ran >= 50, "a Python thread ran %d times during a %.2f s allreduce" % (ran, waited)


def scenario_api():
    import torch
    import hv.torch as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    assert size == 2 and (hvd.local_rank(), hvd.local_size()) == (rank, 2)
    check_dtypes(hvd, torch, rank, size)
    check_layouts(hvd, torch, rank, size)
    check_broadcast_gather(hvd, torch, rank, size)
    check_optimizer(hvd, torch, rank, size)
    check_misuse(hvd, torch, rank, size)
    check_gil(hvd, torch, rank, size)
    hvd.shutdown()


def scenario_peer_gone():
    import torch
    import hv.torch as hvd
    hvd.init()
    rank = hvd.rank()
    hvd.allreduce(torch.ones(100))
    if rank == 1:
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    e = expect_raises(hvd.HvInternalError, hvd.allreduce, torch.ones(1 << 16))
    assert hvd.HorovodInternalError is hvd.HvInternalError
    assert time.monotonic() - t0 < 10, time.monotonic() - t0
    assert e.errname in ("HV_EPEER", "HV_ETIMEDOUT", "HV_ECANCELED"), e
    # Every later call fails the same way until shutdown + init.
    expect_raises(hvd.HvInternalError, hvd.allreduce_, torch.ones(4))
    hvd.shutdown()
    print("rank 0: %s" % e)


def scenario_elastic():
    import torch
    import hv.torch as hvd
    from hv.torch import elastic
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    model = make_model(torch, seed=rank)  # different weights on every rank
    mine = [p.detach().clone() for p in model.parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    state = elastic.TorchState(model, opt, epoch=0, loss=1.5)
    # The optimizer's lazy state exists now, equal to a fresh one's, and the model is unchanged.
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), mine))
    st = opt.state[model.fc1.weight]
    assert float(st["step"]) == 0 and not st["exp_avg"].any(), st
    assert (state.epoch, state.loss) == (0, 1.5)
    # Other keyword values are Python objects (Horovod's TorchState takes any): horovod_cases.py.

    @elastic.run
    def train(state, epochs):
        # run synced everything from rank 0 before calling us.
        w = hvd.allgather_object(model.fc1.weight.sum().item())
        assert len(set(w)) == 1, w
        assert torch.equal(model.fc1.weight, make_model(torch, seed=0).fc1.weight)
        for epoch in range(state.epoch, epochs):
            x, y = batch(torch, 10 * epoch + rank)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            state.epoch = epoch + 1
            state.loss = 0.25 * (epoch + 1)
            state.commit()
        return "trained"

    assert train(state, 2) == "trained" and (state.epoch, state.loss) == (2, 0.5)
    assert float(opt.state[model.fc1.weight]["step"]) == 2
    # restore: back to the last commit, tensors and scalars.
    committed = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    state.epoch, state.loss = 99, -1.0
    state.restore()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), committed))
    assert (state.epoch, state.loss) == (2, 0.5)

    @elastic.run
    def fails(state):
        raise KeyError("not an hv error")

    expect_raises(KeyError, fails, state, contains="not an hv error")

    # ElasticSampler: 2 epochs of 50 samples in steps of 4 per rank, every sample once per epoch.
    sampler = elastic.ElasticSampler(list(range(50)), shuffle=True, seed=7, batch_size=4)
    sstate = elastic.TorchState(None, None, sampler=sampler, epoch=0)

    @elastic.run
    def epochs(sstate):
        orders = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            seen = []
            for b in sampler.batches():
                assert len(b) <= 4
                step = [i for r in hvd.allgather_object(b) for i in r]
                assert sampler.step_samples == len(step), (sampler.step_samples, step)
                seen += step
                sstate.commit()
            assert sorted(seen) == list(range(50)), seen
            st = sampler.stats()
            assert (st["epoch"], st["processed"], st["duplicates"], st["remaining"],
                    st["checksum"]) == (epoch, 50, 0, 0, 50 * 49 // 2), st
            orders.append(seen)
        assert orders[0] != orders[1]  # a new permutation each epoch
        return orders

    orders = epochs(sstate)
    assert hvd.allgather_object(orders)[0] == orders

    # A step cut short (backward started every gradient's allreduce, then an exception): the
    # next run starts afresh, its zero_grad and step work (run drops what was in flight).
    @elastic.run
    def cut_short(state):
        x, y = batch(torch, rank)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        raise KeyError("cut short")

    expect_raises(KeyError, cut_short, state, contains="cut short")

    @elastic.run
    def one_step(state):
        x, y = batch(torch, rank)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        return "stepped"

    assert one_step(state) == "stepped"

    # A TorchState of a fresh DistributedOptimizer calls no collective: a worker that joins a
    # running job builds its state alone. Here only rank 0 builds one, then both meet.
    if rank == 0:
        m2 = make_model(torch, seed=5)
        o2 = hvd.DistributedOptimizer(torch.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9),
                                      named_parameters=m2.named_parameters())
        elastic.TorchState(m2, o2)
        assert "momentum_buffer" in o2.state[m2.fc1.weight]
    hvd.barrier()

    # Without a head, libhv returns a peer failure as it is: rank 1's HvInternalError comes out
    # of run on rank 1, and rank 0's next collective fails (bounded) with HvInternalError.
    @elastic.run
    def peer_fails(state):
        state.commit()
        if rank == 1:
            raise hvd.HvInternalError("simulated peer failure", 8, "HV_EPEER")
        return hvd.allreduce(torch.ones(2))

    t0 = time.monotonic()
    expect_raises(hvd.HvInternalError, peer_fails, state)
    assert time.monotonic() - t0 < 10
    hvd.shutdown()


def main(argv):
    if len(argv) == 3 and argv[1] == "--worker" and argv[2] in ("sampler", "state", "collectives",
                                                                "optimizer"):
        import horovod_cases
        horovod_cases.SCENARIOS[argv[2]]()
        return 0
    if len(argv) == 3 and argv[1] == "--worker" and argv[2] == "ddp":
        import ddp_cases
        ddp_cases.SCENARIOS[argv[2]]()
        return 0
    if len(argv) == 3 and argv[1] == "--worker":
        {"loader": scenario_loader, "api": scenario_api, "peer_gone": scenario_peer_gone,
         "elastic": scenario_elastic, "cuda": scenario_cuda}[argv[2]]()
        return 0
    if len(argv) == 4 and argv[1] == "--pypath" and argv[3] in RANKS:
        return launch(argv[3], argv[2])
    print("usage: torch_test.py --pypath DIR {%s}" % "|".join(RANKS), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
