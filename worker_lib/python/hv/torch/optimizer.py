"""hv.torch.optimizer: DistributedOptimizer, which averages gradients across ranks while backward
is still running. A hook on each parameter's gradient accumulator fires as soon as backward has
written that parameter's gradient; the gradient goes to libhv as a named asynchronous allreduce
("allreduce.<parameter name>"), so libhv negotiates, fuses and reduces it while backward
computes the next layers. Gradients are handed over in groups (hv_allreduce_group_async: one
call through ctypes, one handle) of at least GROUP_BYTES, and the rest as one group when backward
ends; libhv still matches each tensor by its name. step() then waits only for what is still in
flight.

Used by training scripts through hv.torch.DistributedOptimizer(optimizer, named_parameters=...).
It is a subclass of the user's optimizer class made on the fly, so isinstance checks, schedulers
and state_dict() keep working.
"""

import contextlib
import ctypes
import warnings

import torch

from .. import _lib
from ..errors import NotInitializedError
from . import _ops
from .process_sets import check as check_process_set

# Ready gradients are submitted to libhv in groups of at least this many bytes (a larger
# gradient goes at once, alone), and what is left when backward ends goes as one group: one
# call through ctypes per group instead of one per gradient, while the large gradients of a big
# model still start reducing during backward. libhv fuses across groups as before.
GROUP_BYTES = 1 << 20

_engine = getattr(torch.autograd.Variable, "_execution_engine", None)


class _DistributedOptimizer(torch.optim.Optimizer):
    # Mixed into a subclass of the user's optimizer class (see DistributedOptimizer below); the
    # original class's __init__ runs on its own param_groups, which carry every hyperparameter.
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False):
        if _ops._lib.hv_size() < 1:
            raise NotInitializedError("hv.torch.DistributedOptimizer: hv has not been "
                                      "initialised; call hv.torch.init() first", 7, "HV_ESTATE")
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._op = op
        if backward_passes_per_step < 1:
            raise ValueError("hv.torch.DistributedOptimizer: backward_passes_per_step must be at "
                             "least 1, got %r" % backward_passes_per_step)
        self.backward_passes_per_step = backward_passes_per_step
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                dup = sorted({n for n in names if names.count(n) > 1})
                raise ValueError("hv.torch.DistributedOptimizer: named_parameters has duplicate "
                                 "names: %s" % ", ".join(dup))
            by_id = {id(p): n for n, p in named}
            unnamed = [i for i, p in enumerate(all_params) if id(p) not in by_id]
            if unnamed:
                raise ValueError("hv.torch.DistributedOptimizer: named_parameters lacks %d of the "
                                 "optimizer's parameters (positions %s); pass "
                                 "model.named_parameters() of the model the optimizer trains" %
                                 (len(unnamed), unnamed[:8]))
        else:
            by_id = {id(p): "noname.%d" % i for i, p in enumerate(all_params)}
        self._names = {p: ("allreduce." + by_id[id(p)]).encode() for p in all_params}
        self._requires_update = [p for p in all_params if p.requires_grad]
        self._submitted = set()  # params whose gradient this step has been handed on
        self._ready = []  # (param, grad) ready, not yet submitted: the next group
        self._ready_bytes = 0
        self._flush_queued = False  # a flush is queued for the end of this backward
        self._groups = []  # (handle, [grad, ...]): groups in flight
        self._handles = {}  # param -> (handle, ctx): a gradient's own allreduce in flight
        self._delay = {p: backward_passes_per_step for p in self._requires_update}
        self._predivide = float(gradient_predivide_factor)
        self._sparse_as_dense = bool(sparse_as_dense)
        self._was_sparse = set()  # params whose sparse gradient this step made dense
        self._explicit = _explicit_groups(groups, self._requires_update)  # param -> group
        self._group_left = {}  # group -> members not yet handed on this step
        self._group_ready = {}  # group -> [(param, grad)] ready to go together
        self._reset_groups()
        self._synchronized = False
        self._should_synchronize = True
        self._hooks = []
        if _ops._lib.hv_size() > 1:
            self._register_hooks()

    def _reset_groups(self):
        self._group_left = {}
        for gid in self._explicit.values():
            self._group_left[gid] = self._group_left.get(gid, 0) + 1
        self._group_ready = {gid: [] for gid in self._group_left}

    def _register_hooks(self):
        for p in self._requires_update:
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                self._hooks.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))
                continue
            # torch < 2.1: the AccumulateGrad node that writes p.grad, reached through a view.
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self._hooks.append(acc.register_hook(self._make_hook(p)))
            self._hooks.append(acc)  # keeps the node (and its hook) alive

    def _make_hook(self, p):
        def hook(*_):
            if p in self._submitted:
                raise AssertionError(
                    "hv.torch.DistributedOptimizer: gradients were computed more than "
                    "backward_passes_per_step (%d) times before step(); raise "
                    "backward_passes_per_step to accumulate gradients locally" %
                    self.backward_passes_per_step)
            self._delay[p] -= 1
            if self._delay[p] == 0:
                self._hand_on(p)
                if not self._flush_queued and self._ready:
                    # The rest of this backward's gradients go out as one group when backward
                    # ends (DDP's last bucket), not only at step().
                    queue = getattr(_engine, "queue_callback", None)
                    if queue is not None:
                        self._flush_queued = True
                        queue(self._flush_end)
        return hook

    def _hand_on(self, p):
        """p's gradient is final for this step: into the next group (a dense contiguous CPU
        gradient, no compression: the common case), else its own allreduce. With explicit
        groups, a group goes when all its gradients are ready."""
        self._submitted.add(p)
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        if p.grad.layout != torch.strided:
            if not self._sparse_as_dense:
                raise TypeError(
                    "hv.torch.DistributedOptimizer: %s has a %s gradient; hv reduces dense "
                    "tensors: give DistributedOptimizer sparse_as_dense=True (Horovod's option; "
                    "it is made dense for the reduction and sparse again for the step)" %
                    (self._names[p].decode()[len("allreduce."):], p.grad.layout))
            p.grad = p.grad.to_dense()
            self._was_sparse.add(p)
        g = p.grad
        if self._predivide != 1.0:
            g.mul_(1.0 / self._predivide)  # the rest of the average after the sum (synchronize)
        gid = self._explicit.get(p)
        groupable = (self._compression is _ops.Compression.none and g.is_cpu and
                     g.layout == torch.strided and g.dtype in _ops._DTYPES and g.is_contiguous())
        if gid is not None:
            self._group_left[gid] -= 1
            if groupable:
                self._group_ready[gid].append((p, g))
            else:
                self._alone(p, g)
            if self._group_left[gid] == 0:
                ready, self._group_ready[gid] = self._group_ready[gid], []
                self._submit(ready)
            return
        if groupable:
            self._ready.append((p, g))
            self._ready_bytes += g.numel() * g.element_size()
            if self._ready_bytes >= GROUP_BYTES:
                self._flush()
            return
        self._alone(p, g)

    def _alone(self, p, g):
        """p's gradient in its own allreduce (compressed, or not a dense contiguous CPU one)."""
        t, ctx = self._compression.compress(g)
        self._handles[p] = (_ops.allreduce_async_(t, name=self._names[p].decode(), op=self._op),
                            (t, ctx))

    def _flush_end(self):
        self._flush_queued = False
        self._flush()

    def _flush(self):
        """Submits the ready gradients as one group."""
        ready, self._ready, self._ready_bytes = self._ready, [], 0
        self._submit(ready)

    def _submit(self, ready):
        """Submits [(param, grad)] as one group: one call into libhv, one handle (libhv still
        matches, fuses and reduces them tensor by tensor, by name)."""
        if not ready:
            return
        arr = (_lib.Tensor * len(ready))()
        for i, (p, g) in enumerate(ready):
            t = arr[i]
            t.name = self._names[p]
            t.inp = t.out = g.data_ptr()
            t.count = g.numel()
            t.dtype = _ops._DTYPES[g.dtype]
        h = ctypes.c_uint64(0)
        _lib.check(_lib.hv_allreduce_group_async(arr, len(ready), self._op, ctypes.byref(h)),
                   "hv.torch.DistributedOptimizer")
        self._groups.append((h.value, [g for _, g in ready]))

    def synchronize(self):
        """Submits the gradients that backward did not produce (unused parameters: zeros, so
        every rank submits the same names) and waits for every gradient's allreduce."""
        if _ops._lib.hv_size() <= 1 and not self._submitted:
            self._synchronized = True
            return
        for p in self._requires_update:
            if p not in self._submitted:
                self._hand_on(p)
        self._flush()
        groups, handles = self._groups, self._handles
        self._groups, self._handles, self._submitted = [], {}, set()
        self._flush_queued = False
        self._delay = {p: self.backward_passes_per_step for p in self._requires_update}
        first_error = None
        for h, _grads in groups:
            rc = _lib.hv_wait(h)
            if rc != 0 and first_error is None:
                try:
                    _lib.check(rc, "hv.torch.DistributedOptimizer")
                except Exception as exc:  # wait for every handle before raising the first error
                    first_error = exc
        for p, (h, (t, ctx)) in handles.items():
            try:
                out = _ops.synchronize(h)
            except Exception as exc:
                first_error = first_error or exc
                continue
            if out is not p.grad:
                p.grad.copy_(self._compression.decompress(out, ctx))
        self._reset_groups()
        if first_error is not None:
            raise first_error
        if self._predivide != 1.0:
            for p in self._requires_update:
                p.grad.mul_(self._predivide)
        for p in self._was_sparse:
            p.grad = p.grad.to_sparse()
        self._was_sparse = set()
        self._synchronized = True

    def _forget_pending(self):
        """Drops the allreduces of a step that a failure interrupted (hv.torch.elastic.run calls
        it before every round): their handles are released, their errors ignored, and the next
        backward starts afresh."""
        groups, handles = self._groups, self._handles
        self._groups, self._handles, self._submitted = [], {}, set()
        self._ready, self._ready_bytes, self._flush_queued = [], 0, False
        for h, _ in groups:
            _lib.hv_wait(h)  # the old generation's failure, already handled
        for h, _ in handles.values():
            try:
                _ops.synchronize(h)
            except Exception:  # noqa: BLE001  (the old generation's failure, already handled)
                pass
        self._delay = {p: self.backward_passes_per_step for p in self._requires_update}
        self._reset_groups()
        self._was_sparse = set()
        self._synchronized = False

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Lets step() skip its synchronize() after an explicit one (e.g. to clip gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called after optimizer.synchronize() without "
                              "optimizer.skip_synchronize(): gradients are reduced twice")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._submitted:
            raise AssertionError("hv.torch.DistributedOptimizer: zero_grad() called after "
                                 "backward() but before step() or synchronize()")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _explicit_groups(groups, params):
    """Horovod's groups: None, a number of groups (the parameters in order, split as evenly as
    possible), or lists of parameters (each list one group; the others alone). Returns
    {param: group index} for the parameters that are in a group of their own making."""
    if groups is None:
        return {}
    if isinstance(groups, int) and not isinstance(groups, bool):
        if groups < 0:
            raise ValueError("hv.torch.DistributedOptimizer: groups must be a non-negative "
                             "integer or a list of lists of parameters, got %d" % groups)
        if groups == 0:
            return {}
        n = len(params)
        return {p: i * groups // max(n, 1) for i, p in enumerate(params)}
    if not isinstance(groups, (list, tuple)):
        raise ValueError("hv.torch.DistributedOptimizer: groups must be a non-negative integer "
                         "or a list of lists of parameters, got %s" % type(groups).__name__)
    known = {id(p) for p in params}
    out = {}
    for gid, group in enumerate(groups):
        for p in group:
            if not isinstance(p, torch.Tensor):
                raise ValueError("hv.torch.DistributedOptimizer: groups must consist of "
                                 "parameters (torch.Tensor), got %s" % type(p).__name__)
            if p in out:
                raise ValueError("hv.torch.DistributedOptimizer: a parameter can only appear "
                                 "once in groups")
            if id(p) in known:
                out[p] = gid
    return out


def DistributedOptimizer(optimizer, named_parameters=None, compression=_ops.Compression.none,
                         backward_passes_per_step=1, op=_ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=None):
    """Wraps optimizer so that step() applies gradients averaged (op) over all ranks; each
    gradient's allreduce starts as soon as backward produced it. named_parameters (normally
    model.named_parameters()) names the tensors across ranks; without it they are named by
    position, which needs the same optimizer construction on every rank.
    backward_passes_per_step: local accumulation steps before the allreduce.
    gradient_predivide_factor (op Average only): gradients are divided by it before the sum and
    multiplied by it over the world size after. groups (num_groups, deprecated): a number of
    groups, or lists of parameters; a group's gradients go to libhv together once all of them
    are ready. sparse_as_dense: sparse gradients are made dense for the reduction and sparse
    again for the step (without it a sparse gradient is refused). op=Adasum and process sets
    other than the global one raise NotImplementedError."""
    if process_set is not None:
        check_process_set(process_set, "DistributedOptimizer")
    if op is _ops.Adasum:
        raise NotImplementedError(
            "hv.torch.DistributedOptimizer: op=hvd.Adasum is not supported: libhv has no Adasum "
            "reduction (docs/python.md); use op=hvd.Average (Horovod's default), with the "
            "learning rate scaled by the number of ranks")
    if op not in (_ops.Average, _ops.Sum):
        raise ValueError("hv.torch.DistributedOptimizer: op must be Average or Sum")
    if gradient_predivide_factor != 1.0 and op != _ops.Average:
        raise ValueError("hv.torch.DistributedOptimizer: gradient_predivide_factor needs "
                         "op=Average (as Horovod's)")
    if gradient_predivide_factor <= 0:
        raise ValueError("hv.torch.DistributedOptimizer: gradient_predivide_factor must be "
                         "positive, got %r" % gradient_predivide_factor)
    if num_groups:
        warnings.warn("hv.torch.DistributedOptimizer: num_groups is deprecated (as in Horovod): "
                      "use groups", DeprecationWarning)
        groups = num_groups if groups is None else groups
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    dist = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense)
    dist.state.update(optimizer.state)  # wrapping keeps momentum etc. (same parameter keys)
    return dist
