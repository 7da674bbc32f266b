"""hv.torch.elastic: elastic training from Python over libhv's elastic C API (<hv/elastic.h>):
TorchState (a model's and optimizer's tensors and scalars registered as libhv state buffers, so
commit, restore and sync copy memory and never pickle), run (Horovod's hvd.elastic.run: the training
function under libhv's hv_elastic_run retry loop) and ElasticSampler (libhv's exact sampler).

Tested without a head (worker_lib/python/tests/torch_test.py: sync, commit, restore,
exceptions) and under hvsubmit/hvagent with examples/python/train_fmnist.py (rollback after a
kill -9, a drain, a growth schedule: tests/integration/python_elastic_*.sh). See docs/python.md.
"""

import contextlib
import ctypes
import functools
import struct

import torch

from .. import _lib
from ..errors import HvError, NotInitializedError

_state_p = ctypes.c_void_p


class _ResetInfo(ctypes.Structure):
    _fields_ = [("old_size", ctypes.c_int), ("new_size", ctypes.c_int),
                ("old_generation", ctypes.c_uint32), ("new_generation", ctypes.c_uint32),
                ("rollback", ctypes.c_int), ("reason", ctypes.c_char_p)]


_RESET_FN = ctypes.CFUNCTYPE(None, _state_p, ctypes.POINTER(_ResetInfo), ctypes.c_void_p)
_TRAIN_FN = ctypes.CFUNCTYPE(ctypes.c_int, _state_p, ctypes.c_void_p)

_l = _lib.lib
_l.hv_state_create.restype = ctypes.c_int
_l.hv_state_create.argtypes = [ctypes.POINTER(_state_p)]
_l.hv_state_destroy.restype = None
_l.hv_state_destroy.argtypes = [_state_p]
_l.hv_state_add_buffer.restype = ctypes.c_int
_l.hv_state_add_buffer.argtypes = [_state_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
for _fn in ("hv_state_commit", "hv_state_restore", "hv_state_sync", "hv_state_check"):
    getattr(_l, _fn).restype = ctypes.c_int
    getattr(_l, _fn).argtypes = [_state_p]
_l.hv_state_on_reset.restype = ctypes.c_int
_l.hv_state_on_reset.argtypes = [_state_p, _RESET_FN, ctypes.c_void_p]
_l.hv_elastic_run.restype = ctypes.c_int
_l.hv_elastic_run.argtypes = [_state_p, _TRAIN_FN, ctypes.c_void_p]
_l.hv_state_removed.restype = ctypes.c_int
_l.hv_state_removed.argtypes = [_state_p]
_l.hv_generation.restype = ctypes.c_uint32
_l.hv_generation.argtypes = []
for _fn in ("hv_state_resets", "hv_state_rollbacks"):
    getattr(_l, _fn).restype = ctypes.c_uint32
    getattr(_l, _fn).argtypes = [_state_p]

_HV_EINTERNAL = 10
_HV_ESTATE = 7


class _SamplerConfig(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("num_samples", ctypes.c_uint64),
                ("seed", ctypes.c_uint64), ("batch", ctypes.c_uint32),
                ("global_batch", ctypes.c_int), ("shuffle", ctypes.c_int)]


class _SamplerStats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("epoch", ctypes.c_uint64),
                ("processed", ctypes.c_uint64), ("duplicates", ctypes.c_uint64),
                ("remaining", ctypes.c_uint64), ("checksum", ctypes.c_uint64)]


_l.hv_sampler_create.restype = ctypes.c_int
_l.hv_sampler_create.argtypes = [_state_p, ctypes.c_char_p, ctypes.POINTER(_SamplerConfig),
                                 ctypes.POINTER(ctypes.c_void_p)]
_l.hv_sampler_next.restype = ctypes.c_int
_l.hv_sampler_next.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                               ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
_l.hv_sampler_step_samples.restype = ctypes.c_uint64
_l.hv_sampler_step_samples.argtypes = [ctypes.c_void_p]
_l.hv_sampler_next_epoch.restype = ctypes.c_int
_l.hv_sampler_next_epoch.argtypes = [ctypes.c_void_p]
_l.hv_sampler_stats.restype = ctypes.c_int
_l.hv_sampler_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(_SamplerStats)]


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler on libhv's exact sampler: within an epoch every sample is handed
    out once across all ranks, across any number of resets (what was processed is exchanged at
    every commit; a restore hands out again only what was not committed).

    batch_size: samples per step per rank, or the global batch split across ranks when
    global_batch=True (the same optimisation at any world size). Pass the sampler to TorchState
    as a keyword argument (TorchState(model, opt, sampler=s)), which makes its position part of
    the committed state. Iterate a step at a time with batches() (a list per step, possibly
    empty on some ranks in an epoch's last step: every rank still takes part in the step's
    collectives and commit). Iterating the sampler itself yields the same indices one by one
    (for a DataLoader with num_workers=0; prefetching workers would take indices of steps not
    yet processed, which the next commit then counts as done)."""

    def __init__(self, dataset, shuffle=True, seed=0, batch_size=32, global_batch=False):
        n = len(dataset)
        if n < 1 or batch_size < 1:
            raise ValueError("hv.torch.elastic.ElasticSampler: needs a non-empty dataset and "
                             "batch_size >= 1")
        self._cfg = _SamplerConfig(ctypes.sizeof(_SamplerConfig), n, int(seed), int(batch_size),
                                   1 if global_batch else 0, 1 if shuffle else 0)
        self._s = None
        self._state = None
        self.num_samples = n
        self.batch_size = int(batch_size)

    def _attach(self, state, name):
        if self._s is not None:
            raise ValueError("hv.torch.elastic.ElasticSampler: already part of a TorchState")
        s = ctypes.c_void_p()
        _lib.check(_l.hv_sampler_create(state._st, name.encode(), ctypes.byref(self._cfg),
                                        ctypes.byref(s)), "hv_sampler_create")
        self._s, self._state = s, state  # owned by the state (freed with it)

    def _handle(self):
        if self._s is None:
            raise ValueError("hv.torch.elastic.ElasticSampler: pass it to TorchState(..., "
                             "name=sampler) before use")
        return self._s

    def next_batch(self):
        """This rank's indices for the next step (a list, maybe empty), or None at the end of
        the epoch (on every rank at the same step)."""
        cap = self.batch_size + 1
        buf = (ctypes.c_uint64 * cap)()
        n = ctypes.c_size_t(0)
        end = ctypes.c_int(0)
        _lib.check(_l.hv_sampler_next(self._handle(), buf, cap, ctypes.byref(n),
                                      ctypes.byref(end)), "hv.torch.elastic.ElasticSampler")
        if end.value:
            return None
        return list(buf[:n.value])

    def batches(self):
        """Steps of this epoch from the current position: a list of indices per step."""
        while True:
            b = self.next_batch()
            if b is None:
                return
            yield b

    def __iter__(self):
        for b in self.batches():
            yield from b

    def __len__(self):
        return self.num_samples

    @property
    def step_samples(self):
        """Samples of the last step over all ranks (the divisor for a batch mean)."""
        return int(_l.hv_sampler_step_samples(self._handle()))

    def next_epoch(self):
        """Starts the next epoch (every rank)."""
        _lib.check(_l.hv_sampler_next_epoch(self._handle()), "hv.torch.elastic.next_epoch")

    def set_epoch(self, epoch):
        """Horovod's form: moves on to epoch (from the sampler's own epoch; never back)."""
        while self.stats()["epoch"] < epoch:
            self.next_epoch()

    def stats(self):
        """{epoch, processed, duplicates, remaining, checksum} of the current epoch."""
        st = _SamplerStats()
        st.size = ctypes.sizeof(_SamplerStats)
        _lib.check(_l.hv_sampler_stats(self._handle(), ctypes.byref(st)),
                   "hv.torch.elastic.stats")
        return {k: int(getattr(st, k)) for k, _ in _SamplerStats._fields_[1:]}


def _materialize_optimizer_state(optimizer):
    """Creates the optimizer's lazily made state (momentum buffers, Adam's moments) by one step
    with zero gradients and lr 0, then puts step counters back to 0: the state equals a fresh
    optimizer's for SGD, Adam, AdamW, RMSprop, Adagrad, and now has fixed tensors to register."""
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    if all(p in optimizer.state and optimizer.state[p] for p in params):
        return
    saved_grads = [p.grad for p in params]
    saved_lr = [g.get("lr") for g in optimizer.param_groups]
    before = {p: set(optimizer.state[p]) if p in optimizer.state else set() for p in params}
    try:
        for p in params:
            p.grad = torch.zeros_like(p)
        for g in optimizer.param_groups:
            if "lr" in g:
                g["lr"] = 0.0
        # A DistributedOptimizer's step would reduce the zero gradients: a collective that a
        # worker joining a running job would wait in alone (the others are training).
        skip = getattr(optimizer, "skip_synchronize", None)
        with skip() if skip is not None else contextlib.nullcontext():
            optimizer.step()
    finally:
        for p, gr in zip(params, saved_grads):
            p.grad = gr
        for g, lr in zip(optimizer.param_groups, saved_lr):
            if lr is not None:
                g["lr"] = lr
    for p in params:
        for k, v in optimizer.state[p].items():
            if k not in before[p] and k == "step" and isinstance(v, torch.Tensor):
                v.zero_()


class TorchState:
    """The training state that elastic training commits, restores and syncs: the model's
    state_dict tensors, the optimizer's per-parameter state tensors, and scalars given as
    keyword arguments (int or float; read and written as attributes: state.epoch += 1).

    Tensors are registered by memory (data_ptr): they must be contiguous CPU tensors that keep
    their storage (optimizer.step() and in-place updates do; assigning a new tensor to a
    parameter does not). Every rank must build the same state."""

    def __init__(self, model=None, optimizer=None, **scalars):
        object.__setattr__(self, "_st", None)
        if _lib.hv_size() < 1:
            raise NotInitializedError("hv.torch.elastic.TorchState: call hv.torch.init() first",
                                      7, "HV_ESTATE")
        st = _state_p()
        _lib.check(_l.hv_state_create(ctypes.byref(st)), "hv_state_create")
        object.__setattr__(self, "_st", st)
        object.__setattr__(self, "_keep", [])  # tensors and ctypes objects libhv points into
        object.__setattr__(self, "_scalars", {})  # name -> (ctypes.c_uint64, kind)
        object.__setattr__(self, "_callbacks", [])
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "optimizer", optimizer)
        if model is not None:
            for k, t in model.state_dict(keep_vars=True).items():
                self._add_tensor("model." + k, t)
        if optimizer is not None:
            _materialize_optimizer_state(optimizer)
            index = {p: i for i, p in enumerate(p for g in optimizer.param_groups
                                               for p in g["params"])}
            for p, s in optimizer.state.items():
                for k, v in sorted(s.items()):
                    name = "optimizer.%d.%s" % (index[p], k)
                    if isinstance(v, torch.Tensor):
                        self._add_tensor(name, v)
                    else:
                        raise TypeError("hv.torch.elastic.TorchState: optimizer state %s is a %s; "
                                        "only tensors are supported" % (name, type(v).__name__))
        for k, v in scalars.items():
            if isinstance(v, ElasticSampler):
                v._attach(self, k)
                object.__setattr__(self, k, v)
            else:
                self._add_scalar(k, v)

    def _add_tensor(self, name, t):
        t = t.data if isinstance(t, torch.nn.Parameter) else t
        if t.device.type != "cpu" or not t.is_contiguous() or t.layout != torch.strided:
            raise TypeError("hv.torch.elastic.TorchState: %s must be a contiguous CPU tensor" %
                            name)
        if t.numel() == 0:
            return
        self._keep.append(t)
        _lib.check(_l.hv_state_add_buffer(self._st, name.encode(), t.data_ptr(),
                                          t.numel() * t.element_size()), "hv_state_add_buffer")

    def _add_scalar(self, name, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("hv.torch.elastic.TorchState: scalar %s must be an int or a float, "
                            "got %s" % (name, type(v).__name__))
        cell = ctypes.c_uint64(0)
        kind = "f" if isinstance(v, float) else "i"
        self._scalars[name] = (cell, kind)
        self._set_scalar(name, v)
        _lib.check(_l.hv_state_add_buffer(self._st, ("scalar." + name).encode(),
                                          ctypes.addressof(cell), 8), "hv_state_add_buffer")

    def _set_scalar(self, name, v):
        cell, kind = self._scalars[name]
        cell.value = struct.unpack("<Q", struct.pack("<d" if kind == "f" else "<q", v))[0]

    def __getattr__(self, name):
        scalars = self.__dict__.get("_scalars", {})
        if name in scalars:
            cell, kind = scalars[name]
            return struct.unpack("<d" if kind == "f" else "<q", struct.pack("<Q", cell.value))[0]
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name in self._scalars:
            self._set_scalar(name, value)
        else:
            object.__setattr__(self, name, value)

    def commit(self):
        """Snapshots the state; checks the membership every --check-every commits (raises
        HostsUpdatedInterrupt when it changed, HvInternalError when a peer failed)."""
        _lib.check(_l.hv_state_commit(self._st), "hv.torch.elastic.commit")

    def restore(self):
        """Puts the last commit back into the tensors and scalars (local)."""
        _lib.check(_l.hv_state_restore(self._st), "hv.torch.elastic.restore")

    def sync(self):
        """Broadcasts the state from rank 0 and snapshots it (run() does it every round)."""
        _lib.check(_l.hv_state_sync(self._st), "hv.torch.elastic.sync")

    def check_host_updates(self):
        """Checks the membership now; raises HostsUpdatedInterrupt when it changed."""
        _lib.check(_l.hv_state_check(self._st), "hv.torch.elastic.check_host_updates")

    def register_reset_callbacks(self, callbacks):
        """Functions called (no arguments, as in Horovod) on every rank after each new round,
        once the state is synced; they must not call collectives."""
        for cb in callbacks:
            def trampoline(_st, _info, _ud, cb=cb):
                try:
                    cb()
                except Exception as exc:  # cannot raise through C: kept, raised by run()
                    self.__dict__.setdefault("_cb_error", exc)
            c = _RESET_FN(trampoline)
            self._callbacks.append(c)
            _lib.check(_l.hv_state_on_reset(self._st, c, None), "hv_state_on_reset")

    @property
    def removed(self):
        """True when the head removed this worker from the job (drain): exit normally."""
        return bool(_l.hv_state_removed(self._st))

    @property
    def resets(self):
        return int(_l.hv_state_resets(self._st))

    def __del__(self):
        st = self.__dict__.get("_st")
        if st:
            _l.hv_state_destroy(st)


def generation():
    """The job's current generation (libhv's hv_generation): 1 for the first round, one more
    for every membership change; 0 outside a job with a head."""
    return int(_l.hv_generation())


def run(func):
    """Horovod's hvd.elastic.run: decorates func(state, *args, **kwargs). Calling the result
    runs func under libhv's retry loop: the state is synced from rank 0 first; when a peer fails
    (HvInternalError) the state is restored to the last commit and the job re-joins; when the
    membership changes (HostsUpdatedInterrupt from commit) it re-joins without restoring. Any
    other exception from func is raised unchanged. Returns func's result (None for a worker
    removed by a drain: check state.removed)."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        outcome = {}

        def train(_st, _ud):
            try:
                err = state.__dict__.pop("_cb_error", None)
                if err is not None:
                    raise err
                forget = getattr(state.optimizer, "_forget_pending", None)
                if forget is not None:  # a DistributedOptimizer's step cut short by a failure
                    forget()
                outcome["result"] = func(state, *args, **kwargs)
                return 0
            except HvError as exc:
                if exc.code:
                    return exc.code
                outcome["error"] = exc
                return _HV_EINTERNAL
            except BaseException as exc:  # KeyboardInterrupt, SystemExit too: stop the loop
                outcome["error"] = exc
                return _HV_EINTERNAL

        cfn = _TRAIN_FN(train)
        rc = _l.hv_elastic_run(state._st, cfn, None)
        if "error" in outcome:
            raise outcome["error"]
        err = state.__dict__.pop("_cb_error", None)
        if err is not None:
            raise err
        if rc == _HV_ESTATE:
            # hv_elastic_run initialises libhv itself, so its HV_ESTATE never means "call
            # hv.torch.init() first" (NotInitializedError): the head refused this worker's
            # re-join (it ended the job: too few workers past the elastic timeout, too many
            # resets; or the worker had reported Done), or a run was already in progress. The
            # code decides; libhv's last error (the head's words) only tells the user which.
            raise HvError("hv.torch.elastic.run: this worker cannot go on in the job: %s"
                          % (_lib.last_error() or "no round to re-join"), rc, "HV_ESTATE")
        _lib.check(rc, "hv.torch.elastic.run")
        return outcome.get("result")
    return wrapper
