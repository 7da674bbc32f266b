"""hv.torch: Horovod's PyTorch API over libhv. Porting a Horovod script is one line:

    import hv.torch as hvd      # was: import horovod.torch as hvd

Tensors are CPU tensors of float32, float64, float16, bfloat16, int32, int64 or uint8; libhv
reads and writes their memory in place (data_ptr()), and every blocking call releases the GIL.
Errors are hv exceptions (hv.errors); HorovodInternalError is an alias of HvInternalError.
What is and is not supported: docs/python.md.
"""

try:
    import torch  # noqa: F401  (a node without torch: one clear line under hvagent, see hv._node)
except ImportError as _exc:
    from .. import _node
    _node.missing("torch", str(_exc))
    raise

from .. import (HostsUpdatedInterrupt, HvError, HvInternalError, InvalidArgumentError,
                MismatchError, NotInitializedError, barrier as _barrier, cross_rank, cross_size,
                init as _init, is_initialized, local_rank, local_size, rank,
                shutdown as _shutdown, size)
from ._ops import (Adasum, Average, Compression, Max, Min, Product, Sum, allgather, allreduce,
                   allreduce_, allreduce_async, allreduce_async_, broadcast, broadcast_,
                   broadcast_async, broadcast_async_, poll, synchronize)
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .optimizer import DistributedOptimizer
from . import elastic  # noqa: E402  (hv.torch.elastic: TorchState, run, ElasticSampler)
from .collectives import (  # noqa: E402  (issue 27: the rest of horovod.torch)
    allgather_async, alltoall, alltoall_async, ccl_built, cuda_built, ddl_built, gloo_built,
    gloo_enabled, grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
    grouped_reducescatter_async, is_homogeneous, join, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, reducescatter, reducescatter_async, rocm_built,
    sparse_allreduce_async, start_timeline, stop_timeline)
from .process_sets import (  # noqa: E402
    ProcessSet, add_process_set, global_process_set, remove_process_set)
from .sync_batch_norm import SyncBatchNorm  # noqa: E402
from . import parallel  # noqa: E402  (hv.torch.parallel.DistributedDataParallel: DDP scripts)

HorovodInternalError = HvInternalError


def barrier(process_set=None):
    """Returns when every rank has entered the barrier (releases the GIL while waiting)."""
    if process_set is not None:
        from .process_sets import check
        check(process_set, "barrier")
    _barrier()


def init(comm=None, process_sets=None):
    """Joins the job (libhv's hv_init; see hv.init). Horovod's comm (an MPI communicator) and
    process_sets (other than the global set) are refused: hv has no MPI and one set.
    In a DistributedDataParallel script, hv.torch.init() takes the place of
    torch.distributed.init_process_group(...) (hv.torch.parallel.init_process_group takes its
    arguments): rank and size come from the job, no address or port is needed."""
    if comm is not None:
        raise NotImplementedError("hv.torch.init: comm (an MPI communicator) is not supported: "
                                  "hv joins the job from its environment (docs/python.md)")
    for ps in process_sets or ():
        add_process_set(ps)
    _init()


def shutdown():
    """Leaves the job; operations still pending fail and their handles are forgotten."""
    from . import _ops
    try:
        _shutdown()
    finally:
        _ops._forget_all()


__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_rank", "local_size", "barrier",
    "Average", "Sum", "Min", "Max", "Product", "Compression",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "synchronize", "poll",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "allgather",
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
    "DistributedOptimizer", "elastic", "parallel", "SyncBatchNorm", "Adasum",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "allgather_async", "grouped_allgather", "grouped_allgather_async",
    "alltoall", "alltoall_async", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async", "sparse_allreduce_async", "join",
    "cross_rank", "cross_size", "is_homogeneous", "ProcessSet", "global_process_set",
    "add_process_set", "remove_process_set", "start_timeline", "stop_timeline",
    "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
    "HvError", "HvInternalError", "HorovodInternalError", "HostsUpdatedInterrupt",
    "MismatchError", "InvalidArgumentError", "NotInitializedError",
]
