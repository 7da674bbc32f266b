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
                MismatchError, NotInitializedError, barrier, init, is_initialized, local_rank,
                local_size, rank, shutdown as _shutdown, size)
from ._ops import (Average, Compression, Max, Min, Product, Sum, allgather, allreduce,
                   allreduce_, allreduce_async, allreduce_async_, broadcast, broadcast_,
                   broadcast_async, broadcast_async_, poll, synchronize)
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .optimizer import DistributedOptimizer
from . import elastic  # noqa: E402  (hv.torch.elastic: TorchState, run, ElasticSampler)

HorovodInternalError = HvInternalError


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
    "DistributedOptimizer", "elastic",
    "HvError", "HvInternalError", "HorovodInternalError", "HostsUpdatedInterrupt",
    "MismatchError", "InvalidArgumentError", "NotInitializedError",
]
