"""hv.torch.process_sets: Horovod's process sets, as far as libhv has them: one, the global set of
every rank of the job. libhv runs every collective over all ranks (its rings span the world), so
a subset cannot be built: add_process_set, and any other set given to a call, raise
NotImplementedError saying so; the global set (Horovod's default) works everywhere. Used by
hv.torch's calls (their process_set argument) and re-exported by hv.torch.
"""

from .. import _lib


class ProcessSet:
    """Horovod's ProcessSet(ranks). Only the set of every rank can be used in hv."""

    def __init__(self, ranks_or_comm=None):
        self.ranks = None if ranks_or_comm is None else sorted(int(r) for r in ranks_or_comm)
        self.process_set_id = 0 if ranks_or_comm is None else None

    def _is_global(self):
        if self.ranks is None:
            return True
        size = _lib.hv_size()
        return size > 0 and self.ranks == list(range(size))

    def size(self):
        return _lib.hv_size() if self.ranks is None else len(self.ranks)

    def rank(self):
        r = _lib.hv_rank()
        if self.ranks is None:
            return r
        return self.ranks.index(r) if r in self.ranks else -1

    def included(self):
        return self.ranks is None or _lib.hv_rank() in self.ranks

    def __repr__(self):
        return "ProcessSet(%s)" % ("global" if self.ranks is None else self.ranks)


#: Horovod's global_process_set: every rank of the job.
global_process_set = ProcessSet()


def _refuse(what):
    raise NotImplementedError(
        "hv.torch.%s: process sets other than the global one are not supported: libhv runs "
        "every collective over all ranks of the job (docs/python.md, horovod.torch -> "
        "hv.torch); leave process_set out, or use hvd.global_process_set" % what)


def check(process_set, what):
    """Raises unless process_set is the global set (every rank)."""
    if process_set is global_process_set:
        return
    if not isinstance(process_set, ProcessSet) or not process_set._is_global():
        _refuse(what)


def add_process_set(process_set):
    """Horovod's add_process_set: not supported (a set of every rank is the global one)."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps._is_global():
        return global_process_set
    _refuse("add_process_set")


def remove_process_set(process_set):
    """Horovod's remove_process_set: only sets add_process_set returned exist (the global one,
    which cannot be removed: False, as Horovod answers for it)."""
    check(process_set, "remove_process_set")
    return False
