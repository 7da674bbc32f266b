"""hv.torch.collectives: the rest of horovod.torch's collectives and queries, with Horovod's
signatures, over libhv:

  grouped_allreduce(_async)(_)     a list of tensors as one group (hv_allreduce_group_async)
  allgather_async, grouped_allgather(_async)
                                   hv_allgather_async: the shapes first, then the data
  alltoall(_async)                 rows to every rank by `splits`; over an allgather (every rank
                                   receives every rank's rows and keeps its own: a cost, not
                                   libhv's own alltoall)
  reducescatter(_async), grouped_reducescatter(_async)
                                   an allreduce, then this rank's rows (Horovod's split: the
                                   first dim % size ranks get one row more): twice a true
                                   reduce-scatter's traffic
  join                             hv_join: a rank out of data contributes zeros to the others'
                                   allreduces until every rank joined
  cross_rank, cross_size, is_homogeneous, the build queries, and Horovod's calls hv has not
  (timelines, sparse allreduce), which raise NotImplementedError naming what to do instead.

Operations made of several libhv calls get hv.torch handles (negative ints) that synchronize()
and poll() take like libhv's (_ops._register_custom). Re-exported by hv.torch; docs/python.md.
"""

import ctypes
import itertools

import torch

from .. import _lib
from ..errors import MismatchError
from . import _ops
from .process_sets import check as _check_set

_HV_ETOOBIG = 15


def _sets(process_set, what):
    if process_set is not None:
        _check_set(process_set, what)


def _tensor_list(tensors, what):
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("hv.torch.%s: expected a non-empty list of tensors" % what)
    return list(tensors)


class _Each:
    """A custom operation: several hv.torch handles, done when all are; the output is given."""

    def __init__(self, handles, output):
        self.handles, self.output = handles, output

    def test(self):
        return all(_ops.poll(h) for h in self.handles)

    def wait(self):
        outs, first = [], None
        for h in self.handles:
            try:
                outs.append(_ops.synchronize(h))
            except Exception as exc:  # wait for every one before raising the first error
                first = first or exc
        if first is not None:
            raise first
        return self.output(outs) if callable(self.output) else self.output


def _compressed(tensors, compression, what, start):
    """Compresses every tensor, synchronizes start(compressed list), decompresses each output."""
    compression = compression or _ops.Compression.none
    packed = [compression.compress(t) for t in _tensor_list(tensors, what)]
    outs = _ops.synchronize(start([t for t, _ in packed]))
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, packed)]


# ---- grouped allreduce ----------------------------------------------------------------------

def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    """Starts an in-place allreduce of every tensor of the list, as one group: one call into
    libhv, fused as far as the fusion threshold allows. synchronize() returns the list."""
    what = "grouped_allreduce_async_"
    _sets(process_set, what)
    tensors = _tensor_list(tensors, what)
    op = _ops._op(average, op, what)
    base = _ops._name(name, "grouped_allreduce").decode()
    dts = [_ops._dtype(t, what) for t in tensors]
    if any(dt & _ops._ON_DEVICE for dt in dts) or not all(t.is_contiguous() for t in tensors):
        hs = [_ops.allreduce_async_(t, name="%s.%d" % (base, i), op=op,
                                    prescale_factor=prescale_factor,
                                    postscale_factor=postscale_factor)
              for i, t in enumerate(tensors)]
        return _ops._register_custom(_Each(hs, tensors), what)
    names = [("%s.%d" % (base, i)).encode() for i in range(len(tensors))]
    arr = (_lib.Tensor * len(tensors))()
    for i, (t, dt) in enumerate(zip(tensors, dts)):
        _ops._scaled(t, prescale_factor)
        arr[i].name = names[i]
        arr[i].inp = arr[i].out = t.data_ptr()
        arr[i].count = t.numel()
        arr[i].dtype = dt
    h = ctypes.c_uint64(0)
    _lib.check(_lib.hv_allreduce_group_async(arr, len(tensors), op, ctypes.byref(h)),
               "hv.torch.%s" % what)
    post = None
    if postscale_factor != 1.0:
        def post(out):
            for t in out:
                t.mul_(postscale_factor)
            return out
    return _ops._register(h.value, _ops._Pending(tensors, tensors, post, what))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    """As grouped_allreduce_async_, into new tensors (the inputs are not changed)."""
    _sets(process_set, "grouped_allreduce_async")
    copies = [t.clone(memory_format=torch.contiguous_format)
              for t in _tensor_list(tensors, "grouped_allreduce_async")]
    return grouped_allreduce_async_(copies, average, name, op, prescale_factor,
                                    postscale_factor)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """The op (default Average) over all ranks of every tensor of the list, in new tensors,
    as one group. Blocking. compression: Compression.none or Compression.fp16."""
    _sets(process_set, "grouped_allreduce")
    return _compressed(tensors, compression, "grouped_allreduce",
                       lambda ts: grouped_allreduce_async(ts, average, name, op, prescale_factor,
                                                          postscale_factor))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    """In-place grouped_allreduce; returns the list. Blocking."""
    _sets(process_set, "grouped_allreduce_")
    return _ops.synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                     postscale_factor))


# ---- allgather ------------------------------------------------------------------------------

class _Allgather:
    """allgather_async: every rank's shape (hv_allgather_async), then, once they are known, the
    data into a tensor of the right size (a second one)."""

    def __init__(self, tensor, name, what):
        self.dt = _ops._dtype(tensor, what)
        if self.dt & _ops._ON_DEVICE:
            raise TypeError("hv.torch.%s: the tensor is on %s; allgather takes CPU tensors only "
                            "(allreduce and broadcast take CUDA tensors): gather tensor.cpu() "
                            "(docs/python.md, CUDA)" % (what, tensor.device))
        self.what, self.name, self.tensor = what, name, tensor
        self.n = max(_lib.hv_size(), 1)
        self.shape = list(tensor.shape) if tensor.dim() > 0 else [1]
        self.src = tensor.contiguous().view(-1)
        self.mine = torch.tensor(self.shape, dtype=torch.int64)
        self.shapes = torch.empty(len(self.shape) * self.n, dtype=torch.int64)
        self.counts = (ctypes.c_size_t * self.n)()
        self.h1 = self._submit(".shape", self.mine, _lib.INT64, self.shapes, self.counts)
        self.h2 = self.out = None
        self.rc2 = None

    def _submit(self, suffix, src, dt, out, counts):
        h = ctypes.c_uint64(0)
        _lib.check(_lib.hv_allgather_async((self.name + suffix).encode(), src.data_ptr(),
                                           src.numel(), dt, out.data_ptr(), out.numel(), counts,
                                           ctypes.byref(h)), "hv.torch.%s" % self.what)
        return h.value

    def _data(self, rc):
        """The shapes are in (status rc): checks them, submits the data."""
        n = self.n
        if rc == _HV_ETOOBIG:
            raise MismatchError("hv.torch.%s: ranks passed tensors with different numbers of "
                                "dimensions: %s" % (self.what, [self.counts[i] for i in range(n)]),
                                6, "HV_EPROTO")
        _lib.check(rc, "hv.torch.%s" % self.what)
        rows = self.shapes.view(n, len(self.shape))
        if not bool((rows[:, 1:] == self.mine[1:]).all()):
            raise MismatchError("hv.torch.%s: ranks disagree on the dimensions after the first: "
                                "%s" % (self.what, rows.tolist()), 6, "HV_EPROTO")
        self.out = torch.empty([int(rows[:, 0].sum())] + self.shape[1:], dtype=self.tensor.dtype)
        self.h2 = self._submit(".data", self.src, self.dt, self.out, None)

    def test(self):
        done = ctypes.c_int(0)
        if self.h2 is None:
            rc = _lib.hv_test(self.h1, ctypes.byref(done))
            if not done.value:
                return False
            self._data(rc)
        if self.rc2 is None:
            rc = _lib.hv_test(self.h2, ctypes.byref(done))
            if not done.value:
                return False
            self.rc2 = rc
        return True

    def wait(self):
        if self.h2 is None:
            self._data(_lib.hv_wait(self.h1))
        rc = self.rc2 if self.rc2 is not None else _lib.hv_wait(self.h2)
        _lib.check(rc, "hv.torch.%s" % self.what)
        return self.out


def allgather_async(tensor, name=None, process_set=None):
    """Starts an allgather (every rank's tensor concatenated along dimension 0, in rank order;
    the first dimension may differ between ranks); returns a handle for synchronize()."""
    _sets(process_set, "allgather_async")
    name = _ops._name(name, "allgather").decode()
    return _ops._register_custom(_Allgather(tensor, name, "allgather_async"), "allgather_async")


def grouped_allgather_async(tensors, name=None, process_set=None):
    """allgather_async of every tensor of the list; synchronize() returns the list."""
    _sets(process_set, "grouped_allgather_async")
    base = _ops._name(name, "grouped_allgather").decode()
    hs = [allgather_async(t, "%s.%d" % (base, i))
          for i, t in enumerate(_tensor_list(tensors, "grouped_allgather_async"))]
    return _ops._register_custom(_Each(hs, lambda outs: outs), "grouped_allgather_async")


def grouped_allgather(tensors, name=None, process_set=None):
    """allgather of every tensor of the list. Blocking."""
    _sets(process_set, "grouped_allgather")
    return _ops.synchronize(grouped_allgather_async(tensors, name))


# ---- alltoall -------------------------------------------------------------------------------

def _alltoall_splits(tensor, splits, n, what):
    if tensor.dim() == 0:
        raise ValueError("hv.torch.%s: the tensor needs at least one dimension" % what)
    rows = tensor.shape[0]
    if splits is None:
        if rows % n:
            raise ValueError("hv.torch.%s: splits not given, but the first dimension (%d) is not "
                             "a multiple of the number of ranks (%d)" % (what, rows, n))
        return [rows // n] * n
    s = [int(x) for x in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
    if len(s) != n or min(s) < 0:
        raise ValueError("hv.torch.%s: splits must hold %d non-negative counts (one per rank), "
                         "got %s" % (what, n, s))
    if sum(s) > rows:
        raise ValueError("hv.torch.%s: the splits add up to %d, more than the first dimension "
                         "(%d)" % (what, sum(s), rows))
    return s


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Starts Horovod's alltoall: rows splits[k] (in order, along dimension 0) go to rank k;
    splits defaults to equal parts. synchronize() returns (the rows received, in rank order;
    the counts received from each rank, int32). Runs as an allgather of every rank's rows and
    splits, from which each rank keeps its own (every rank receives all rows: a cost)."""
    what = "alltoall_async"
    _sets(process_set, what)
    n, me = max(_lib.hv_size(), 1), max(_lib.hv_rank(), 0)
    s = _alltoall_splits(tensor, splits, n, what)
    base = _ops._name(name, "alltoall").decode()
    h_splits = allgather_async(torch.tensor(s, dtype=torch.int64), base + ".splits")
    h_rows = allgather_async(tensor[:sum(s)], base + ".rows")

    def pick(outs):
        table = outs[0].view(n, n).tolist()  # table[r][k]: rows rank r sends to rank k
        data, parts, start = outs[1], [], 0
        for r in range(n):
            off = start + sum(table[r][:me])
            parts.append(data[off:off + table[r][me]])
            start += sum(table[r])
        received = torch.tensor([table[r][me] for r in range(n)], dtype=torch.int32)
        return torch.cat(parts), received

    return _ops._register_custom(_Each([h_splits, h_rows], pick), what)


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Horovod's alltoall (see alltoall_async). Returns the rows received, and when splits was
    given also the counts received from each rank. Blocking."""
    _sets(process_set, "alltoall")
    out, received = _ops.synchronize(alltoall_async(tensor, splits, name))
    return out if splits is None else (out, received)


# ---- reducescatter --------------------------------------------------------------------------

def _my_rows(rows, n, rank):
    """Horovod's split of a first dimension of `rows` over n ranks: (offset, count) of rank."""
    base, extra = divmod(rows, n)
    return rank * base + min(rank, extra), base + (1 if rank < extra else 0)


def reducescatter_async(tensor, name=None, op=None, process_set=None, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts Horovod's reducescatter: the op (Average, or Sum) over all ranks, of which this
    rank keeps its rows (the first dimension divided among the ranks, the first ones getting one
    more). Runs as an allreduce, then a slice. synchronize() returns the rows."""
    what = "reducescatter_async"
    _sets(process_set, what)
    op = _ops.Average if op is None else op
    if op not in (_ops.Average, _ops.Sum):
        raise ValueError("hv.torch.%s: op must be Average or Sum, as Horovod's" % what)
    if tensor.dim() == 0:
        raise ValueError("hv.torch.%s: the tensor needs at least one dimension" % what)
    off, cnt = _my_rows(tensor.shape[0], max(_lib.hv_size(), 1), max(_lib.hv_rank(), 0))
    h = _ops.allreduce_async(tensor, name=_ops._name(name, "reducescatter").decode(), op=op,
                             prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    return _ops._register_custom(_Each([h], lambda outs: outs[0][off:off + cnt].clone()), what)


def reducescatter(tensor, name=None, compression=None, op=None, process_set=None,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Horovod's reducescatter (see reducescatter_async). Blocking."""
    _sets(process_set, "reducescatter")
    compression = compression or _ops.Compression.none
    t, ctx = compression.compress(tensor)
    out = _ops.synchronize(reducescatter_async(t, name, op, None, prescale_factor,
                                               postscale_factor))
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=None, process_set=None,
                                prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter_async of every tensor of the list; synchronize() returns the list."""
    _sets(process_set, "grouped_reducescatter_async")
    base = _ops._name(name, "grouped_reducescatter").decode()
    hs = [reducescatter_async(t, "%s.%d" % (base, i), op, None, prescale_factor,
                              postscale_factor)
          for i, t in enumerate(_tensor_list(tensors, "grouped_reducescatter_async"))]
    return _ops._register_custom(_Each(hs, lambda outs: outs), "grouped_reducescatter_async")


def grouped_reducescatter(tensors, name=None, compression=None, op=None, process_set=None,
                          prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of every tensor of the list. Blocking."""
    _sets(process_set, "grouped_reducescatter")
    return _compressed(tensors, compression, "grouped_reducescatter",
                       lambda ts: grouped_reducescatter_async(ts, name, op, None, prescale_factor,
                                                              postscale_factor))


# ---- join -----------------------------------------------------------------------------------

def join(device=-1):
    """Horovod's join: this rank has no more data. Blocks until every rank joined; meanwhile
    the others' allreduces (DistributedOptimizer's gradients too) go on with this rank
    contributing zeros (Average still divides by the world size); their broadcasts, allgathers
    and barriers fail with HvError (HV_ENOTSUP). Returns the rank that joined last. device is
    accepted for Horovod's signature (the zeros are host memory)."""
    del device
    last = ctypes.c_int(-1)
    _lib.check(_lib.hv_join(ctypes.byref(last)), "hv.torch.join")
    # The names of unnamed asynchronous calls ("allreduce.noname.N") are a per-process sequence
    # that the ranks that did not join moved on: every rank takes the highest.
    seq = torch.tensor([next(_ops._seq)], dtype=torch.int64)
    _ops.allreduce_(seq, name="hv.torch.join.seq", op=_ops.Max)
    _ops._seq = itertools.count(int(seq.item()) + 1)
    return last.value


# ---- queries --------------------------------------------------------------------------------

def is_homogeneous():
    """True when every host runs the same number of ranks."""
    from .. import cross_size, local_size, size
    return size() == local_size() * cross_size()


def nccl_built():
    """1 when this libhv reduces CUDA tensors on NCCL (built with CUDA and NCCL), else 0."""
    return 1 if _lib.hv_cuda_built() else 0


def cuda_built():
    return bool(_lib.hv_cuda_built())


def mpi_built():
    return False


def mpi_enabled():
    return False


def gloo_built():
    return False


def gloo_enabled():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def rocm_built():
    return False


def mpi_threads_supported():
    raise ValueError("hv.torch.mpi_threads_supported: hv does not use MPI (libhv's own rings); "
                     "every hv.torch call may be made from any thread")


def _not_supported(what, instead):
    raise NotImplementedError("hv.torch.%s is not supported: %s (docs/python.md, horovod.torch "
                              "-> hv.torch)" % (what, instead))


def start_timeline(file_path, mark_cycles=False):
    _not_supported("start_timeline", "hv has no Horovod timeline; libhv's figures are in the "
                   "head's metrics and `hvctl job`")


def stop_timeline():
    _not_supported("stop_timeline", "hv has no Horovod timeline")


def sparse_allreduce_async(tensor, name, op, process_set=None):
    _not_supported("sparse_allreduce_async", "reduce the dense tensor (tensor.to_dense()), or "
                   "give DistributedOptimizer sparse_as_dense=True")
