"""hv.torch.elastic.state: the elastic state and the retry loop, with Horovod's names.

  State         Horovod's hvd.elastic.State: the base of every state; commit(), check_host_updates(),
                register_reset_callbacks(), and save/restore/sync/reset for subclasses to fill.
  ObjectState   Horovod's ObjectState(bcast_object, get_rank, **kwargs): Python objects as
                attributes, committed, restored and synced from rank 0.
  TorchState    Horovod's TorchState(model, optimizer, **kwargs): a model's and an optimizer's
                tensors registered with libhv by memory (commit, restore and sync copy memory and
                never pickle), samplers, int and float scalars in libhv too, any other object as
                in ObjectState.
  run           Horovod's hvd.elastic.run: the training function under libhv's hv_elastic_run.

Everything registered with libhv (tensors, scalars, samplers' positions, the commit count) is
committed, restored after a failure and synced from rank 0 by libhv itself (hv_elastic_run calls
hv_state_restore and hv_state_sync in C). What libhv cannot hold (Python objects, a subclass's
own save/restore/sync) is handled at the start of every round, in the training function's
trampoline: restore after a rollback (to the objects of the commit libhv restored, found by the
registered commit count), then sync from rank 0, then reset() and the reset callbacks. Called by
training scripts (docs/python.md, "Elastic").
"""

import contextlib
import ctypes
import functools
import pickle
import struct

import torch

from ... import _lib
from ...errors import HvError, NotInitializedError
from . import _c
from .sampler import ElasticSampler
from .steps import StepSampler


class State:
    """Horovod's hvd.elastic.State. bcast_object and get_rank are accepted for Horovod's
    signature; bcast_object (default hv.torch.broadcast_object) syncs a subclass's Python
    objects. Subclasses implement save() (at commit), restore() (after a failure: back to the
    last save) and sync() (at the start of every round: rank 0's state to every rank), and may
    implement reset() (after a membership change, before the callbacks)."""

    def __init__(self, bcast_object=None, get_rank=None):
        del get_rank
        d = self.__dict__
        if bcast_object is not None or "_bcast" not in d:
            d["_bcast"] = bcast_object
        if "_seq" in d:
            return  # (a subclass's __init__ came here before)
        d.setdefault("_st", None)  # libhv's hv_state_t, made at first need (_handle)
        d["_keep"] = []  # tensors and ctypes objects libhv points into
        d["_samplers"] = []  # ElasticSamplers: exchanged at commit, rewound per round
        d["_reset_callbacks"] = []
        d["_seq"] = ctypes.c_uint64(0)  # commits made (registered: restored and synced)
        d["_reset_info"] = None  # what libhv's reset callback saw, for the next round

    # ---- libhv's state --------------------------------------------------------------------

    def _handle(self):
        st = self.__dict__.get("_st")
        if st is not None:
            return st
        st = _c.state_p()
        _lib.check(_c.l.hv_state_create(ctypes.byref(st)), "hv_state_create")
        self.__dict__["_st"] = st
        _lib.check(_c.l.hv_state_add_buffer(st, b"hv.state.commits",
                                            ctypes.addressof(self._seq), 8),
                   "hv_state_add_buffer")

        def on_reset(_st, info, _ud):
            i = info.contents
            self.__dict__["_reset_info"] = {"rollback": bool(i.rollback),
                                            "old_size": i.old_size, "new_size": i.new_size}
        cb = _c.RESET_FN(on_reset)
        self._keep.append(cb)
        _lib.check(_c.l.hv_state_on_reset(st, cb, None), "hv_state_on_reset")
        return st

    def _add_buffer(self, name, t):
        """Registers a contiguous CPU tensor's memory under name."""
        t = t.data if isinstance(t, torch.nn.Parameter) else t
        if t.device.type != "cpu" or not t.is_contiguous() or t.layout != torch.strided:
            raise TypeError("hv.torch.elastic: %s must be a contiguous CPU tensor (the state "
                            "is committed by copying host memory)" % name)
        if t.numel() == 0:
            return
        self._keep.append(t)
        _lib.check(_c.l.hv_state_add_buffer(self._handle(), name.encode(), t.data_ptr(),
                                            t.numel() * t.element_size()), "hv_state_add_buffer")

    # ---- Horovod's interface --------------------------------------------------------------

    def register_reset_callbacks(self, callbacks):
        """Functions called with no arguments on every rank after each membership change,
        once the state is synced (Horovod calls them before its sync: here they see the synced
        state), in the order registered. They may call collectives: every rank calls them at
        the same point."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for cb in self._reset_callbacks:
            cb()

    def commit(self):
        """Saves the state (every registered buffer, the samplers' positions with every rank's
        recorded samples, save()), then every --check-every commits checks the membership:
        raises HostsUpdatedInterrupt when it changed, HvInternalError when a peer failed.
        Collective: every rank commits the same number of times."""
        st = self._handle()
        for s in self._samplers:
            s._exchange()
        self._seq.value += 1
        self.save()
        _lib.check(_c.l.hv_state_commit(st), "hv.torch.elastic.commit")

    def check_host_updates(self):
        """Checks the membership now (a collective); raises HostsUpdatedInterrupt when it
        changed."""
        _lib.check(_c.l.hv_state_check(self._handle()), "hv.torch.elastic.check_host_updates")

    def save(self):
        """Saves what libhv does not hold (a subclass's); called by commit()."""

    def restore(self):
        """Restores the last save (a subclass's); called after a failure."""

    def sync(self):
        """Makes every rank's state rank 0's (a subclass's); called at the start of every
        round."""

    def reset(self):
        """Called after a membership change, before the reset callbacks."""

    @property
    def removed(self):
        """True when the head removed this worker from the job (drain): exit normally."""
        return bool(_c.l.hv_state_removed(self._handle()))

    @property
    def resets(self):
        """Membership changes this worker went through."""
        return int(_c.l.hv_state_resets(self._handle()))

    # ---- the start of a round (run's trampoline) --------------------------------------------

    def _round_restore(self):
        self.restore()

    def _round_sync(self):
        self.sync()

    def _begin_round(self):
        """Before the training function runs, every round: drop what a failure cut short,
        restore after a rollback and sync what libhv does not hold, then (after a membership
        change) reset() and the callbacks."""
        info = self.__dict__.pop("_reset_info", None)
        self.__dict__["_reset_info"] = None
        for s in self._samplers:
            s._rewind()
        for opt in self._optimizers():
            forget = getattr(opt, "_forget_pending", None)
            if forget is not None:  # a DistributedOptimizer's step cut short by a failure
                forget()
        if info is not None and info["rollback"]:
            self._round_restore()
        self._round_sync()
        if info is not None:
            self.on_reset()

    def _optimizers(self):
        return []

    def __del__(self):
        st = self.__dict__.get("_st")
        if st:
            _c.l.hv_state_destroy(st)


class ObjectState(State):
    """Horovod's ObjectState(bcast_object, get_rank, **kwargs): every keyword argument becomes
    an attribute. ints and floats live in libhv (committed, restored and synced with the rest,
    and in the head's copies of the state); other objects are pickled at every commit and sent
    from rank 0 at every sync (they must pickle)."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        d = self.__dict__
        d.setdefault("_scalars", {})  # name -> (ctypes.c_uint64, "i" or "f")
        d.setdefault("_objects", [])  # names of the pickled attributes
        d.setdefault("_saved", {})  # commit count -> pickled objects
        State.__init__(self, bcast_object, get_rank)
        for k, v in kwargs.items():
            self._add_value(k, v)
        self._save_objects()

    def _add_value(self, name, v):
        if (isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool) and
                                     -2 ** 63 <= v < 2 ** 63)):
            cell = ctypes.c_uint64(0)
            self._scalars[name] = (cell, "f" if isinstance(v, float) else "i")
            self._keep.append(cell)
            self._set_scalar(name, v)
            _lib.check(_c.l.hv_state_add_buffer(self._handle(), ("scalar." + name).encode(),
                                                ctypes.addressof(cell), 8),
                       "hv_state_add_buffer")
        else:
            self._objects.append(name)
            self.__dict__[name] = v

    def _set_scalar(self, name, v):
        cell, kind = self._scalars[name]
        try:
            cell.value = struct.unpack("<Q", struct.pack("<d" if kind == "f" else "<q", v))[0]
        except struct.error:
            raise TypeError("hv.torch.elastic: %s holds %s, so it takes %s, not %r" %
                            (name, "a float" if kind == "f" else "an int",
                             "numbers" if kind == "f" else "whole numbers", v)) from None

    def __getattr__(self, name):
        scalars = self.__dict__.get("_scalars", {})
        if name in scalars:
            cell, kind = scalars[name]
            return struct.unpack("<d" if kind == "f" else "<q", struct.pack("<Q", cell.value))[0]
        raise AttributeError("%s has no attribute %r" % (type(self).__name__, name))

    def __setattr__(self, name, value):
        if name in self.__dict__.get("_scalars", {}):
            self._set_scalar(name, value)
        else:
            object.__setattr__(self, name, value)

    def _pickled(self):
        return pickle.dumps({k: self.__dict__[k] for k in self._objects},
                            protocol=pickle.HIGHEST_PROTOCOL)

    def _save_objects(self):
        if not self._objects:
            return
        seq = self._seq.value
        self._saved[seq] = self._pickled()
        for k in [k for k in self._saved if k + 1 < seq]:
            del self._saved[k]  # libhv restores the last commit or the one before it

    def _restore_objects(self):
        blob = self._saved.get(self._seq.value)
        if blob is not None:
            self.__dict__.update(pickle.loads(blob))

    def _sync_objects(self):
        if not self._objects:
            return
        bcast = self._bcast
        if bcast is None:
            from ..functions import broadcast_object as bcast
        blob = bcast(self._pickled(), 0)
        self.__dict__.update(pickle.loads(blob))
        self._saved[self._seq.value] = blob

    def save(self):
        self._save_objects()

    def restore(self):
        """Back to the last commit: libhv's buffers, then the objects."""
        rc = _c.l.hv_state_restore(self._handle())
        if rc != _c.HV_ESTATE:  # no commit yet: nothing of libhv's to restore
            _lib.check(rc, "hv.torch.elastic.restore")
        for s in self._samplers:
            s._rewind()  # what was recorded since is handed out again
        self._restore_objects()

    def sync(self):
        """rank 0's state to every rank (a collective), then a snapshot of it."""
        _lib.check(_c.l.hv_state_sync(self._handle()), "hv.torch.elastic.sync")
        self._sync_objects()

    # In a round libhv has restored and synced its buffers already: objects only.
    def _round_restore(self):
        self._restore_objects()

    def _round_sync(self):
        self._sync_objects()


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


class TorchState(ObjectState):
    """Horovod's TorchState(model=None, optimizer=None, **kwargs): the training state that
    elastic training commits, restores and syncs. Modules (model and any keyword that is a
    torch.nn.Module) register their state_dict tensors, optimizers their per-parameter state
    tensors, samplers (ElasticSampler, StepSampler) their positions; ints and floats are scalars
    in libhv (state.epoch += 1); other keyword values are Python objects (ObjectState).

    Tensors are registered by memory (data_ptr): they must be contiguous CPU tensors that keep
    their storage (optimizer.step() and in-place updates do; assigning a new tensor to a
    parameter does not). Every rank must build the same state. The constructor calls no
    collective (a worker that joins a running job builds its state alone)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.__dict__["_st"] = None
        if _lib.hv_size() < 1:
            raise NotInitializedError("hv.torch.elastic.TorchState: call hv.torch.init() first",
                                      7, "HV_ESTATE")
        d = self.__dict__
        d["_registered"] = set()  # attributes whose objects are registered by memory
        d["_opts"] = []
        State.__init__(self)
        objects = {}
        for k, v in dict(model=model, optimizer=optimizer, **kwargs).items():
            if isinstance(v, torch.nn.Module):
                for name, t in v.state_dict(keep_vars=True).items():
                    self._add_buffer("%s.%s" % (k, name), t)
            elif isinstance(v, torch.optim.Optimizer):
                self._add_optimizer(k, v)
            elif isinstance(v, (ElasticSampler, StepSampler)):
                v._attach(self, k)
                if isinstance(v, ElasticSampler):
                    self._samplers.append(v)
            elif v is None and k in ("model", "optimizer"):
                d[k] = None
                continue
            else:
                objects[k] = v
                continue
            d["_registered"].add(k)
            d[k] = v
        ObjectState.__init__(self, None, None, **objects)

    def _add_optimizer(self, key, optimizer):
        _materialize_optimizer_state(optimizer)
        index = {p: i for i, p in enumerate(p for g in optimizer.param_groups
                                           for p in g["params"])}
        for p, s in optimizer.state.items():
            for k, v in sorted(s.items()):
                name = "%s.%d.%s" % (key, index[p], k)
                if v is None:
                    continue  # (SGD without momentum keeps momentum_buffer None: no state)
                if not isinstance(v, torch.Tensor):
                    raise TypeError("hv.torch.elastic.TorchState: optimizer state %s is a %s; "
                                    "only tensors are supported" % (name, type(v).__name__))
                self._add_buffer(name, v)
        self._opts.append(optimizer)

    def _optimizers(self):
        return self._opts

    def __setattr__(self, name, value):
        if name in self.__dict__.get("_registered", ()) and value is not self.__dict__[name]:
            raise TypeError("hv.torch.elastic.TorchState: %s is registered by memory; it cannot "
                            "be replaced (load_state_dict into it, or build a new TorchState)"
                            % name)
        ObjectState.__setattr__(self, name, value)


def generation():
    """The job's current generation (libhv's hv_generation): 1 for the first round, one more
    for every membership change; 0 outside a job with a head."""
    return int(_c.l.hv_generation())


def run(func):
    """Horovod's hvd.elastic.run: decorates func(state, *args, **kwargs). Calling the result
    runs func under libhv's retry loop: the state is synced from rank 0 first; when a peer fails
    (HvInternalError) the state is restored to the last commit and the job re-joins; when the
    membership changes (HostsUpdatedInterrupt from commit) it re-joins without restoring. Any
    other exception from func is raised unchanged. Returns func's result (None for a worker
    removed by a drain: check state.removed)."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not isinstance(state, State):
            raise TypeError("hv.torch.elastic.run: the first argument must be the elastic state "
                            "(hvd.elastic.TorchState, ObjectState or a subclass of State), got "
                            "%s" % type(state).__name__)
        outcome = {}

        def train(_st, _ud):
            try:
                state._begin_round()
                outcome["result"] = func(state, *args, **kwargs)
                return 0
            except HvError as exc:
                if exc.code:
                    return exc.code
                outcome["error"] = exc
                return _c.HV_EINTERNAL
            except BaseException as exc:  # KeyboardInterrupt, SystemExit too: stop the loop
                outcome["error"] = exc
                return _c.HV_EINTERNAL

        cfn = _c.TRAIN_FN(train)
        rc = _c.l.hv_elastic_run(state._handle(), cfn, None)
        if "error" in outcome:
            raise outcome["error"]
        if rc == _c.HV_ESTATE:
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
