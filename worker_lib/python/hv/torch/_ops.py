"""hv.torch._ops: collectives on torch tensors over libhv (Horovod's allreduce, broadcast and
allgather families with their names and meaning). It hands libhv the tensor's memory through
data_ptr(); it does not copy unless a tensor is not contiguous (then it reduces a contiguous copy
and copies the result back). Called by hv.torch's users and by its optimizer and functions.

CUDA tensors (allreduce and broadcast families) go through libhv's *_on calls, which declare the
memory as the tensor's CUDA device and pass torch's current stream on it; a libhv built without
CUDA is refused here with a RuntimeError that names the fix. torch.cuda is touched only for a
tensor whose is_cuda is True, so a CPU-only torch never initialises CUDA state.

Async handles: allreduce_async/broadcast_async return an int (libhv's handle). The tensors
involved are kept alive in _pending until synchronize() (or a poll() that saw completion) is
done with them, so the memory libhv writes stays valid however the caller drops references.
"""

import ctypes
import itertools
import threading

import torch

from .. import _lib
from ..errors import MismatchError
from .process_sets import check as _check_set

# Reduction ops: the values of libhv's enum hv_op.
Sum = _lib.SUM
Average = _lib.AVG
Min = _lib.MIN
Max = _lib.MAX
Product = _lib.PRODUCT
_OPS = (Sum, Average, Min, Max, Product)
#: Horovod's Adasum: a name to refuse clearly (libhv has no Adasum reduction).
Adasum = "Adasum"

_DTYPES = {
    torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64,
    torch.float16: _lib.FLOAT16,
    torch.bfloat16: _lib.BFLOAT16,
    torch.int32: _lib.INT32,
    torch.int64: _lib.INT64,
    torch.uint8: _lib.UINT8,
}
_DTYPE_NAMES = ", ".join(str(d).replace("torch.", "") for d in _DTYPES)

_seq = itertools.count()  # names of unnamed async operations (issued in the same order per rank)
_lock = threading.Lock()
_pending = {}  # handle -> _Pending


class _Pending:
    __slots__ = ("output", "keep", "post", "done", "rc", "what", "custom")

    def __init__(self, output, keep, post, what, custom=None):
        self.output = output  # what synchronize() returns
        self.keep = keep  # tensors libhv reads or writes: alive until completion
        self.post = post  # callable(output) -> output after completion, or None
        self.done = False  # a poll() saw completion (libhv released the handle)
        self.rc = 0  # the status that poll() saw
        self.what = what  # the call's name, for errors
        self.custom = custom  # an operation of several libhv calls: .test(), .wait() (below)


_custom_ids = itertools.count(-1, -1)  # handles of custom operations (libhv's are positive)


def _register_custom(op, what):
    """A handle for an operation made of several libhv calls (hv.torch.collectives): op.test()
    says whether it is done (never blocks), op.wait() waits and returns the output."""
    return _register(next(_custom_ids), _Pending(None, op, None, what, custom=op))


# Added to libhv's dtype by _dtype for a CUDA tensor: the call sites then use the *_on calls.
_ON_DEVICE = 0x100


def _dtype(tensor, what):
    """libhv's dtype for tensor, plus _ON_DEVICE for a CUDA tensor; TypeError for anything libhv
    cannot take."""
    # The per-call path: a dense CPU tensor of a known dtype (attribute reads only; device.type
    # alone would cost ~0.8 us, a sixth of a 4 KiB allreduce).
    if isinstance(tensor, torch.Tensor) and tensor.is_cpu and tensor.layout == torch.strided:
        dt = _DTYPES.get(tensor.dtype)
        if dt is not None:
            return dt
    if getattr(tensor, "is_cuda", False) is True:
        return _cuda_dtype(tensor, what)
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("hv.torch.%s: expected a torch.Tensor, got %s" %
                        (what, type(tensor).__name__))
    if tensor.layout != torch.strided:
        raise TypeError("hv.torch.%s: %s tensors are not supported (dense tensors only)" %
                        (what, tensor.layout))
    if tensor.device.type != "cpu":
        raise TypeError(
            "hv.torch.%s: the tensor is on %s; hv.torch takes CPU and CUDA tensors only "
            "(move it with .cpu(), see docs/python.md, CUDA)" % (what, tensor.device))
    return _known_dtype(tensor, what)


def _known_dtype(tensor, what):
    dt = _DTYPES.get(tensor.dtype)
    if dt is None:
        raise TypeError("hv.torch.%s: dtype %s is not supported (supported: %s)" %
                        (what, str(tensor.dtype).replace("torch.", ""), _DTYPE_NAMES))
    return dt


_cuda_built = None  # libhv's hv_cuda_built(), asked at the first CUDA tensor


def _cuda_dtype(tensor, what):
    """_dtype for a tensor whose is_cuda is True: libhv must understand device memory."""
    global _cuda_built
    if _cuda_built is None:
        _cuda_built = bool(_lib.hv_cuda_built())
    if not _cuda_built:
        raise RuntimeError(
            "hv.torch.%s: the tensor is on %s, but this libhv (%s) was built without CUDA and "
            "NCCL, so it cannot reduce device memory: rebuild libhv on a machine with the CUDA "
            "toolkit and NCCL (cmake -DHV_WITH_NCCL=ON) and point HV_LIBRARY at it, or move the "
            "tensor with .cpu() (docs/python.md, CUDA)" % (what, tensor.device, _lib.path))
    if tensor.layout != torch.strided:
        raise TypeError("hv.torch.%s: %s tensors are not supported (dense tensors only)" %
                        (what, tensor.layout))
    return _known_dtype(tensor, what) | _ON_DEVICE


_torch_cuda = False  # torch.cuda.is_available() was seen True


def _current_stream(device):
    """torch's current CUDA stream on device, as the integer cudaStream_t libhv takes."""
    global _torch_cuda
    if not _torch_cuda:
        if not torch.cuda.is_available():  # does not initialise CUDA
            raise RuntimeError(
                "hv.torch: a tensor on %s, but torch sees no CUDA device "
                "(torch.cuda.is_available() is False): run where the GPU is visible, or move "
                "the tensor with .cpu() (docs/python.md, CUDA)" % device)
        _torch_cuda = True
    return torch.cuda.current_stream(device).cuda_stream


_HV_ENOTSUP = 16


def _check_on(rc, what, tensor):
    """_lib.check for the *_on calls: HV_ENOTSUP there means no CUDA device in this process."""
    if rc == _HV_ENOTSUP:
        raise RuntimeError(
            "hv.torch.%s: the tensor is on %s, but libhv sees no CUDA device in this process "
            "(CUDA_VISIBLE_DEVICES, the driver): run where the GPU is visible, or move the "
            "tensor with .cpu() (docs/python.md, CUDA)" % (what, tensor.device))
    _lib.check(rc, "hv.torch.%s" % what)


def _where(tensor):
    """(device ordinal, stream) of a CUDA tensor for libhv's *_on calls."""
    device = tensor.device
    return device.index, _current_stream(device) or None


def _op(average, op, what):
    if op is not None and average is not None:
        raise ValueError("hv.torch.%s: give op or average (deprecated), not both" % what)
    if op is None:
        op = Sum if average is False else Average
    if op not in _OPS:
        if op is Adasum:
            raise NotImplementedError(
                "hv.torch.%s: op=hvd.Adasum is not supported: libhv reduces with Sum, Average, "
                "Min, Max and Product (docs/python.md); use Average, Horovod's default" % what)
        raise ValueError("hv.torch.%s: unsupported op %r (hv supports Sum, Average, Min, Max, "
                         "Product)" % (what, op))
    return op


def _name(name, kind):
    if name is None:
        return ("%s.noname.%d" % (kind, next(_seq))).encode()
    if not isinstance(name, str):
        raise TypeError("hv.torch: name must be a str, got %s" % type(name).__name__)
    b = name.encode()
    if len(b) > 255 or b"\0" in b:
        raise ValueError("hv.torch: name %r is longer than 255 bytes or holds a NUL" % name)
    return b


def _scaled(tensor, factor):
    if factor == 1.0:
        return tensor
    return tensor.mul_(factor)


def _post(post, postscale_factor):
    if postscale_factor == 1.0:
        return post
    if post is None:
        return lambda out: out.mul_(postscale_factor)
    return lambda out: post(out).mul_(postscale_factor)


def _register(handle, pending):
    with _lock:
        _pending[handle] = pending
    return handle


def _submit_allreduce(name, src, dst, dt, op, what):
    h = ctypes.c_uint64(0)
    if dt & _ON_DEVICE:
        rc = _lib.hv_allreduce_async_on(name, src.data_ptr(), dst.data_ptr(), dst.numel(),
                                        dt & ~_ON_DEVICE, op, *_where(dst), ctypes.byref(h))
        _check_on(rc, what, dst)
    else:
        rc = _lib.hv_allreduce_async(name, src.data_ptr(), dst.data_ptr(), dst.numel(), dt, op,
                                     ctypes.byref(h))
    _lib.check(rc, "hv.torch.%s" % what)
    return h.value


def _allreduce_now(src, dst, dt, op, what, name=None):
    """One blocking allreduce of src into dst (the same tensor for in place). name (bytes, or
    None: matched by call order): a named blocking call, matched across ranks by name, which
    starts a round at once instead of waiting for the fusion cycle. A CUDA tensor with a name
    goes as an async call and its wait (which ends the cycle as well)."""
    if dt & _ON_DEVICE:
        if name is not None:
            h = _submit_allreduce(name, src, dst, dt, op, what)
            _lib.check(_lib.hv_wait(h), "hv.torch.%s" % what)
            return
        rc = _lib.hv_allreduce_on(src.data_ptr(), dst.data_ptr(), dst.numel(), dt & ~_ON_DEVICE,
                                  op, *_where(dst))
        _check_on(rc, what, dst)
    elif name is not None:
        rc = _lib.hv_allreduce_named(name, src.data_ptr(), dst.data_ptr(), dst.numel(), dt, op)
    else:
        rc = _lib.hv_allreduce(src.data_ptr(), dst.data_ptr(), dst.numel(), dt, op)
    _lib.check(rc, "hv.torch.%s" % what)


def _broadcast_now(buf, dt, root, what, name=None):
    """One blocking broadcast of buf from root, in place; name as for _allreduce_now."""
    if dt & _ON_DEVICE:
        if name is not None:
            h = ctypes.c_uint64(0)
            rc = _lib.hv_broadcast_async_on(name, buf.data_ptr(), buf.numel(), dt & ~_ON_DEVICE,
                                            root, *_where(buf), ctypes.byref(h))
            _check_on(rc, what, buf)
            rc = _lib.hv_wait(h.value)
        else:
            rc = _lib.hv_broadcast_on(buf.data_ptr(), buf.numel(), dt & ~_ON_DEVICE, root,
                                      *_where(buf))
            _check_on(rc, what, buf)
    elif name is not None:
        rc = _lib.hv_broadcast_named(name, buf.data_ptr(), buf.numel(), dt, root)
    else:
        rc = _lib.hv_broadcast(buf.data_ptr(), buf.numel(), dt, root)
    _lib.check(rc, "hv.torch.%s" % what)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    """Starts an allreduce of tensor into a new tensor; returns a handle for synchronize()."""
    if process_set is not None:
        _check_set(process_set, "allreduce_async")
    dt = _dtype(tensor, "allreduce_async")
    op = _op(average, op, "allreduce_async")
    src = tensor.contiguous()
    if prescale_factor != 1.0:
        src = src.mul(prescale_factor)
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    h = _submit_allreduce(_name(name, "allreduce"), src, out, dt, op, "allreduce_async")
    return _register(h, _Pending(out, (src, out), _post(None, postscale_factor),
                                 "allreduce_async"))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    """Starts an in-place allreduce of tensor; returns a handle for synchronize()."""
    if process_set is not None:
        _check_set(process_set, "allreduce_async_")
    dt = _dtype(tensor, "allreduce_async_")
    op = _op(average, op, "allreduce_async_")
    post = None
    buf = tensor
    if not tensor.is_contiguous():
        buf = tensor.contiguous()
        post = lambda out: tensor.copy_(out)  # noqa: E731
    _scaled(buf, prescale_factor)
    h = _submit_allreduce(_name(name, "allreduce"), buf, buf, dt, op, "allreduce_async_")
    return _register(h, _Pending(tensor if post is None else buf, (buf, tensor),
                                 _post(post, postscale_factor), "allreduce_async_"))


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """Returns the op (default Average) over all ranks of tensor, in a new tensor. Blocking;
    the GIL is released while libhv works. compression: Compression.none or Compression.fp16."""
    if process_set is not None:
        _check_set(process_set, "allreduce")
    if compression is not None and compression is not Compression.none:
        t, ctx = compression.compress(tensor)
        out = allreduce(t, average, name, None, op, prescale_factor, postscale_factor)
        return compression.decompress(out, ctx)
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor))
    # The common case in one libhv call: a blocking allreduce, unnamed (libhv names it by
    # sequence, so ranks must issue unnamed calls in the same order, as with MPI) or named
    # (matched by name; it does not wait for the fusion cycle either).
    dt = _dtype(tensor, "allreduce")
    op = _op(average, op, "allreduce")
    nm = None if name is None else _name(name, "allreduce")
    src = tensor.contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    _allreduce_now(src, out, dt, op, "allreduce", nm)
    return out


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    """In-place allreduce of tensor (default Average); returns tensor. Blocking."""
    if process_set is not None:
        _check_set(process_set, "allreduce_")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                            postscale_factor))
    dt = _dtype(tensor, "allreduce_")
    op = _op(average, op, "allreduce_")
    nm = None if name is None else _name(name, "allreduce")
    if not tensor.is_contiguous():
        buf = tensor.contiguous()
        _allreduce_now(buf, buf, dt, op, "allreduce_", nm)
        return tensor.copy_(buf)
    if dt & _ON_DEVICE:
        _allreduce_now(tensor, tensor, dt, op, "allreduce_", nm)
        return tensor
    p = tensor.data_ptr()
    if nm is None:
        rc = _lib.hv_allreduce(p, p, tensor.numel(), dt, op)
    else:
        rc = _lib.hv_allreduce_named(nm, p, p, tensor.numel(), dt, op)
    _lib.check(rc, "hv.torch.allreduce_")
    return tensor


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts an in-place broadcast of tensor from root_rank; returns a handle."""
    if process_set is not None:
        _check_set(process_set, "broadcast_async_")
    dt = _dtype(tensor, "broadcast_async_")
    post = None
    buf = tensor
    if not tensor.is_contiguous():
        buf = tensor.contiguous()
        post = lambda out: tensor.copy_(out)  # noqa: E731
    h = ctypes.c_uint64(0)
    if dt & _ON_DEVICE:
        rc = _lib.hv_broadcast_async_on(_name(name, "broadcast"), buf.data_ptr(), buf.numel(),
                                        dt & ~_ON_DEVICE, int(root_rank), *_where(buf),
                                        ctypes.byref(h))
        _check_on(rc, "broadcast_async_", buf)
    else:
        rc = _lib.hv_broadcast_async(_name(name, "broadcast"), buf.data_ptr(), buf.numel(), dt,
                                     int(root_rank), ctypes.byref(h))
    _lib.check(rc, "hv.torch.broadcast_async_")
    return _register(h.value, _Pending(tensor if post is None else buf, (buf, tensor), post,
                                       "broadcast_async_"))


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Starts a broadcast from root_rank into a new tensor (a copy of tensor on the root)."""
    if process_set is not None:
        _check_set(process_set, "broadcast_async")
    _dtype(tensor, "broadcast_async")
    return broadcast_async_(tensor.clone(memory_format=torch.contiguous_format), root_rank, name)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    """Overwrites tensor with root_rank's; returns tensor. Blocking."""
    if process_set is not None:
        _check_set(process_set, "broadcast_")
    dt = _dtype(tensor, "broadcast_")
    nm = None if name is None else _name(name, "broadcast")
    buf = tensor if tensor.is_contiguous() else tensor.contiguous()
    _broadcast_now(buf, dt, int(root_rank), "broadcast_", nm)
    if buf is not tensor:
        tensor.copy_(buf)
    return tensor


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Returns root_rank's tensor in a new tensor. Blocking."""
    if process_set is not None:
        _check_set(process_set, "broadcast")
    _dtype(tensor, "broadcast")
    return broadcast_(tensor.clone(memory_format=torch.contiguous_format), root_rank, name)


def _allgather_raw(src, count, dt, out, cap, counts, what):
    rc = _lib.hv_allgather(src, count, dt, out, cap, counts)
    _lib.check(rc, "hv.torch.%s" % what)


def allgather(tensor, name=None, process_set=None):
    """Concatenates every rank's tensor along dimension 0, in rank order (the first dimension may
    differ between ranks; the others must agree, else MismatchError on every rank). Blocking.
    name is accepted for Horovod compatibility; libhv matches allgathers by call order."""
    if process_set is not None:
        _check_set(process_set, "allgather")
    del name
    dt = _dtype(tensor, "allgather")
    if dt & _ON_DEVICE:
        raise TypeError("hv.torch.allgather: the tensor is on %s; allgather takes CPU tensors "
                        "only (allreduce and broadcast take CUDA tensors): gather "
                        "tensor.cpu() (docs/python.md, CUDA)" % tensor.device)
    n = _lib.hv_size()
    shape = list(tensor.shape) if tensor.dim() > 0 else [1]
    # Every rank's shape first: same rank count everywhere, so the data gather can be sized.
    mine = torch.tensor(shape, dtype=torch.int64)
    shapes = torch.empty(len(shape) * max(n, 1), dtype=torch.int64)
    counts = (ctypes.c_size_t * max(n, 1))()
    rc = _lib.hv_allgather(mine.data_ptr(), mine.numel(), _lib.INT64, shapes.data_ptr(),
                           shapes.numel(), counts)
    if rc == 15:  # HV_ETOOBIG: some rank's tensor has more dimensions
        raise MismatchError("hv.torch.allgather: ranks passed tensors with different numbers of "
                            "dimensions: %s" % [counts[i] for i in range(n)], 6, "HV_EPROTO")
    _lib.check(rc, "hv.torch.allgather")
    rows = shapes.view(n, len(shape))
    if not bool((rows[:, 1:] == mine[1:]).all()):
        raise MismatchError("hv.torch.allgather: ranks disagree on the dimensions after the "
                            "first: %s" % rows.tolist(), 6, "HV_EPROTO")
    src = tensor.contiguous().view(-1)
    total = int(rows[:, 0].sum())
    out = torch.empty([total] + shape[1:], dtype=tensor.dtype)
    _allgather_raw(src.data_ptr(), src.numel(), dt, out.data_ptr(), out.numel(), None,
                   "allgather")
    return out


def _allgather_bytes(data):
    """Every rank's bytes, as a list in rank order (for allgather_object)."""
    n = _lib.hv_size()
    src = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(
        0, dtype=torch.uint8)
    ln = torch.tensor([len(data)], dtype=torch.int64)
    lens = torch.empty(max(n, 1), dtype=torch.int64)
    _allgather_raw(ln.data_ptr(), 1, _lib.INT64, lens.data_ptr(), lens.numel(), None,
                   "allgather_object")
    out = torch.empty(int(lens.sum()), dtype=torch.uint8)
    _allgather_raw(src.data_ptr(), src.numel(), _lib.UINT8, out.data_ptr(), out.numel(), None,
                   "allgather_object")
    res, off = [], 0
    for ln in lens.tolist():
        res.append(out[off:off + ln].numpy().tobytes())
        off += ln
    return res


def poll(handle):
    """True when the operation of handle has completed (never blocks)."""
    with _lock:
        p = _pending.get(handle)
    if p is None:
        raise ValueError("hv.torch.poll: unknown or already synchronized handle %r" % handle)
    if p.done:
        return True
    if p.custom is not None:
        p.done = p.custom.test()
        return p.done
    done = ctypes.c_int(0)
    rc = _lib.hv_test(handle, ctypes.byref(done))
    if done.value:
        p.done, p.rc = True, rc
    return bool(done.value)


def synchronize(handle):
    """Waits for the operation of handle (the GIL is released) and returns its output tensor;
    raises the operation's hv exception if it failed. The handle is spent afterwards."""
    with _lock:
        p = _pending.pop(handle, None)
    if p is None:
        raise ValueError("hv.torch.synchronize: unknown or already synchronized handle %r" %
                         handle)
    if p.custom is not None:
        return p.custom.wait()
    rc = p.rc if p.done else _lib.hv_wait(handle)
    _lib.check(rc, "hv.torch.%s" % p.what)
    return p.output if p.post is None else p.post(p.output)


def _forget_all():
    """Drops every pending entry (after shutdown: libhv failed them all)."""
    with _lock:
        _pending.clear()


class _NoneCompressor:
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _FP16Compressor:
    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """Horovod's gradient compression: none (default) or fp16 (cast to float16 for the wire)."""
    none = _NoneCompressor
    fp16 = _FP16Compressor

