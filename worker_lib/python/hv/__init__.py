"""hv: Python bindings of libhv, hv's worker library, in pure Python (ctypes over the public C API
of <hv/hv.h>; no compiled extension, so one package works with any Python 3 and any torch).

  import hv.torch as hvd     Horovod's PyTorch API (init, allreduce, DistributedOptimizer, ...)

This module holds what does not depend on a framework: the library's version and path, the
exceptions (hv.errors) and the process-wide lifetime calls that hv.torch re-exports.

A process that imported hv ends its part of the job when it exits, as Horovod does at
interpreter exit: libhv's hv_shutdown_at_exit, asked for here, shuts libhv down (reporting Done)
when the process exits with status 0 while initialised, and leaves without reporting Done for
any other status (an uncaught exception is status 1: the rank failed). hvd.shutdown() is not
needed; calling it is harmless. os._exit() and signals skip it.
See docs/python.md.
"""

from . import _lib
from .errors import (HostsUpdatedInterrupt, HvError, HvInternalError, InvalidArgumentError,
                     MismatchError, NotInitializedError)

__all__ = ["HvError", "HvInternalError", "HostsUpdatedInterrupt", "MismatchError",
           "InvalidArgumentError", "NotInitializedError", "library_path", "version", "init",
           "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "cross_rank", "cross_size", "host_name", "barrier", "abort"]

#: The path libhv.so was loaded from.
library_path = _lib.path

# (HV_ENOTSUP on a C library without on_exit: then a script must call shutdown() itself.)
_lib.hv_shutdown_at_exit()


def version():
    """libhv's version string ("0.1.0")."""
    return _lib.hv_version().decode()


def is_initialized():
    return _lib.hv_size() > 0


def init():
    """Joins the job (rendezvous from the HV_* environment, see worker_lib/include/hv/hv.h).
    Blocks until every rank joined. A second call while initialised does nothing."""
    if is_initialized():
        return
    _lib.check(_lib.hv_init(), "hv_init")


def shutdown():
    """Leaves the job; operations still pending fail. Harmless when not initialised."""
    _lib.check(_lib.hv_shutdown(), "hv_shutdown")


def abort():
    """Aborts the data plane at once (any thread); pending operations fail with HvInternalError
    here and on the peers. shutdown() + init() rebuild it."""
    _lib.check(_lib.hv_abort(), "hv_abort")


def _ident(fn, what):
    v = fn()
    if v < 0:
        raise NotInitializedError("hv.%s(): hv has not been initialised; call hv.torch.init() "
                                  "first" % what, 7, "HV_ESTATE")
    return v


def rank():
    return _ident(_lib.hv_rank, "rank")


def size():
    return _ident(_lib.hv_size, "size")


def local_rank():
    return _ident(_lib.hv_local_rank, "local_rank")


def local_size():
    return _ident(_lib.hv_local_size, "local_size")


def cross_rank():
    """The index of this worker's host among the job's hosts (Horovod's cross_rank)."""
    return _ident(_lib.hv_cross_rank, "cross_rank")


def cross_size():
    """The number of hosts the job runs on (Horovod's cross_size)."""
    return _ident(_lib.hv_cross_size, "cross_size")


def host_name():
    """The node this worker runs on, as the cluster knows it."""
    _ident(_lib.hv_size, "host_name")
    return _lib.hv_host_name().decode()


def barrier():
    """Returns when every rank has entered the barrier (releases the GIL while waiting)."""
    _lib.check(_lib.hv_barrier(), "hv_barrier")
