"""hv.torch.parallel: torch's DistributedDataParallel on hv, for DDP scripts (issue 27, section 2).
A DDP script changes two lines:

    hv.torch.init()                                   # was: dist.init_process_group("gloo")
    model = hv.torch.parallel.DistributedDataParallel(model)   # was: torch's DDP

DistributedDataParallel behaves as torch's: rank 0's parameters and buffers are broadcast at
construction; gradients are averaged in buckets of about bucket_cap_mb (the parameters in reverse
order, the first bucket at most 1 MiB as torch's), each bucket's allreduce started from the autograd
hook that completed it, so communication overlaps the rest of backward; backward() returns
when every bucket is reduced and copied back into .grad (a callback queued on autograd's engine
at the end of backward, as torch's reducer does). no_sync() accumulates locally; the next
synchronised backward reduces the sum. find_unused_parameters=True finds at forward the
parameters the output does not depend on and marks them ready at the first hook (torch's
traversal); a parameter unused on every rank keeps its .grad untouched, as in torch.

Every bucket is a named asynchronous allreduce of one flat buffer ("ddp.<instance>.<bucket>"),
so libhv matches buckets by name whatever order ranks finish them in. What is refused
(NotImplementedError naming it) and what is accepted and ignored: docs/python.md, "From
DistributedDataParallel". Also here: init_process_group and friends with torch.distributed's
names, over hv (for the lines of a DDP script that ask who they are).
"""

import contextlib
import warnings

import torch

from .. import _lib
from . import _ops
from .elastic import generation as _generation

_DEFAULT_FIRST_BUCKET_BYTES = 1 << 20  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES

_engine = getattr(torch.autograd.Variable, "_execution_engine", None)

_instances = 0  # DDP instances made in this process: names their buckets (same order per rank)

# torch DDP's constructor arguments that hv does not implement (refused when set to anything but
# their default), with why and what to do instead.
_REFUSED = {
    "process_group": "hv reduces over the whole job (one process group): pass None",
    "mixed_precision": "cast the model yourself (model.half()/bfloat16())",
    "device_mesh": "hv reduces over the whole job (one process group): pass None",
}


def _move(obj, device):
    """obj (tensors in tuples, lists and dicts) with its tensors moved to device."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return type(obj)(*(_move(x, device) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(x, device) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _move(v, device)) for k, v in obj.items())
    return obj


def _tensors(obj, out):
    """The tensors in obj (a forward's output: tensors in tuples, lists and dicts), into out."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out)
    return out


def _reachable(outputs):
    """ids of the leaf tensors (parameters) that autograd reaches from outputs' grad_fns."""
    seen, found = set(), set()
    stack = [t.grad_fn for t in _tensors(outputs, []) if t.grad_fn is not None]
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        var = getattr(fn, "variable", None)  # an AccumulateGrad node: its leaf
        if var is not None:
            found.add(id(var))
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen:
                stack.append(nxt)
    return found


class _Bucket:
    """A flat buffer of some parameters' gradients (one dtype, one device), reduced as one."""
    __slots__ = ("index", "buf", "params", "slots", "left", "handle", "name")

    def __init__(self, index, params, name):
        self.index = index
        self.params = params  # indices into DistributedDataParallel._params
        self.name = name
        self.buf = None
        self.slots = []
        self.left = 0
        self.handle = None


class DistributedDataParallel(torch.nn.Module):
    """torch.nn.parallel.DistributedDataParallel over hv: the same constructor, the same
    behaviour (module docstring). The wrapped model is self.module; state_dict() has torch DDP's
    "module." prefix, so checkpoints are interchangeable with torch's DDP.

    init_sync (torch 2.x's name; default: True unless this worker joined a running elastic job
    in a later generation) broadcasts rank 0's parameters and buffers at construction. A worker
    that joins a running job must not: the others are not constructing; hv.torch.elastic's
    TorchState gives it rank 0's state at the start of its first round. (A wrapper built again
    inside the elastic training function after a reset also skips it; pass init_sync=True or
    False to decide.)"""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=25,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, init_sync=None, **kwargs):
        super().__init__()
        global _instances
        what = "hv.torch.parallel.DistributedDataParallel"
        if not isinstance(module, torch.nn.Module):
            raise TypeError("%s: module must be a torch.nn.Module, got %s" %
                            (what, type(module).__name__))
        if _lib.hv_size() < 1:
            from ..errors import NotInitializedError
            raise NotInitializedError("%s: hv has not been initialised; call hv.torch.init() "
                                      "first (in place of dist.init_process_group)" % what, 7,
                                      "HV_ESTATE")
        for k in kwargs:
            if k not in _REFUSED and k not in ("delay_all_reduce_named_params",
                                               "param_to_hook_all_reduce"):
                raise TypeError("%s: unexpected keyword argument %r" % (what, k))
        args = dict(kwargs, process_group=process_group)
        for k, v in args.items():
            if v is None:
                continue
            if k == "process_group" and _is_global_set(v):
                continue
            raise NotImplementedError("%s: %s is not supported: %s (docs/python.md, From "
                                      "DistributedDataParallel)" %
                                      (what, k, _REFUSED.get(k, "hv reduces every parameter "
                                                             "in its own hook order")))
        if _engine is None or not hasattr(_engine, "queue_callback"):
            raise NotImplementedError("%s needs torch's autograd engine callbacks "
                                      "(torch.autograd.Variable._execution_engine."
                                      "queue_callback, torch >= 1.x); this torch %s lacks them" %
                                      (what, torch.__version__))
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError("%s: bucket_cap_mb must be positive, got %r" % (what, bucket_cap_mb))
        if check_reduction:
            warnings.warn("%s: check_reduction is deprecated in torch and ignored" % what)
        self.module = module
        self.device_ids = None
        self.dim = dim
        self.output_device = output_device
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.static_graph = bool(static_graph)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        devices = {p.device for p in module.parameters()}
        if device_ids is not None:
            ids = list(device_ids)
            if len(ids) != 1 or len(devices) != 1 or next(iter(devices)).type == "cpu":
                raise ValueError(
                    "%s: device_ids must be None for a CPU module or one with parameters on "
                    "several devices, and a list of the module's one device otherwise "
                    "(got %r, parameters on %s) (as torch's)" %
                    (what, device_ids, sorted(str(d) for d in devices)))
            self.device_ids = [torch.device(ids[0]) if not isinstance(ids[0], int)
                               else torch.device("cuda", ids[0])]
        ignore = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        self._params = [p for n, p in module.named_parameters()
                        if p.requires_grad and n not in ignore]
        self._param_names = [n for n, p in module.named_parameters()
                             if p.requires_grad and n not in ignore]
        self._buffers_to_sync = [(n, b) for n, b in module.named_buffers() if n not in ignore]
        self._prefix = "ddp.%d." % _instances
        _instances += 1
        self._buckets = self._make_buckets()
        self._bucket_of = {}  # param index -> (bucket, slot index)
        for b in self._buckets:
            for j, i in enumerate(b.params):
                self._bucket_of[i] = (b, j)
        # Per step: which parameters' hooks fired (ready), were used at all (local_used: across
        # no_sync steps too, as torch's local_used_map), were found unused at forward.
        n = len(self._params)
        self._ready = [False] * n
        self._used = torch.zeros(n, dtype=torch.int32)
        self._unused_at_forward = []
        self._expect_hooks = False  # the last forward was synchronised: its backward reduces
        self._hooks_fired = False  # a hook of that backward fired (the step has begun)
        self._queued = False  # the end-of-backward callback is queued
        self._scale = 1.0
        self._in_flight = []  # buckets whose allreduce is in flight
        # What the last synchronised backward did (tests read it: overlap is observable):
        # buckets started from a hook while backward ran, and the total.
        self.last_backward = {"buckets_in_backward": 0, "buckets": 0}
        self._hook_handles = []
        self._register_hooks()
        if init_sync is None:
            init_sync = _generation() <= 1
        if init_sync and _lib.hv_size() > 1:
            self._sync_module_states()

    # ---- construction ----------------------------------------------------------------------

    def _make_buckets(self):
        """Buckets in reverse parameter order (backward's order, roughly), split by dtype and
        device, each up to bucket_cap_mb; the first up to 1 MiB (as torch's; less when
        bucket_cap_mb is less), so that the first allreduce starts early."""
        buckets, open_ = [], {}  # (dtype, device) -> [param indices, bytes]
        order = list(range(len(self._params)))[::-1]

        def close(key):
            idx, _ = open_.pop(key)
            buckets.append(_Bucket(len(buckets), idx,
                                   self._prefix + str(len(buckets))))

        for i in order:
            p = self._params[i]
            key = (p.dtype, p.device)
            cap = (min(_DEFAULT_FIRST_BUCKET_BYTES, self.bucket_bytes_cap) if not buckets
                   else self.bucket_bytes_cap)
            cur = open_.setdefault(key, [[], 0])
            cur[0].append(i)
            cur[1] += p.numel() * p.element_size()
            if cur[1] >= cap:
                close(key)
        for key in list(open_):
            close(key)
        for b in buckets:
            ps = [self._params[i] for i in b.params]
            b.buf = torch.zeros(sum(p.numel() for p in ps), dtype=ps[0].dtype,
                                device=ps[0].device)
            off = 0
            for p in ps:
                b.slots.append(b.buf[off:off + p.numel()].view_as(p))
                off += p.numel()
        return buckets

    def _register_hooks(self):
        for i, p in enumerate(self._params):
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                self._hook_handles.append(p.register_post_accumulate_grad_hook(
                    self._make_hook(i)))
                continue
            # torch < 2.1: the AccumulateGrad node that writes p.grad, reached through a view;
            # kept alive here so that every later graph uses it (and its hook).
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self._hook_handles.append(acc.register_hook(self._make_hook(i)))
            self._hook_handles.append(acc)

    def _make_hook(self, i):
        def hook(*_):
            self._on_grad(i)
        return hook

    def _sync_module_states(self):
        """Rank 0's parameters and buffers to every rank (all in flight at once)."""
        handles = []
        ignore = set(getattr(self.module, "_ddp_params_and_buffers_to_ignore", ()))
        params = [(n, p) for n, p in self.module.named_parameters() if n not in ignore]
        for n, t in params + self._buffers_to_sync:
            handles.append(_ops.broadcast_async_(t.data, 0, name=self._prefix + "init." + n))
        _wait_all(handles)

    # ---- forward -----------------------------------------------------------------------------

    def forward(self, *inputs, **kwargs):
        self._drop_cut_short()
        if self.require_forward_param_sync and self.broadcast_buffers and _lib.hv_size() > 1:
            self._sync_buffers()
        grad_sync = torch.is_grad_enabled() and self.require_backward_grad_sync
        self.require_forward_param_sync = grad_sync
        if grad_sync:
            self._prepare_for_backward()
        elif torch.is_grad_enabled():
            self._expect_hooks = False  # a no_sync() forward: its backward accumulates locally
        if self.device_ids is not None:
            inputs, kwargs = _move(inputs, self.device_ids[0]), _move(kwargs, self.device_ids[0])
        out = self.module(*inputs, **kwargs)
        if torch.is_grad_enabled() and (self.find_unused_parameters or self.static_graph):
            reached = _reachable(out)
            self._unused_at_forward = [i for i, p in enumerate(self._params)
                                       if id(p) not in reached]
        else:
            self._unused_at_forward = []
        return out

    def _sync_buffers(self):
        handles = [_ops.broadcast_async_(b.data if b.requires_grad else b, 0,
                                         name=self._prefix + "buf." + n)
                   for n, b in self._buffers_to_sync if b is not None and b.numel() > 0]
        _wait_all(handles)

    def _prepare_for_backward(self):
        n = len(self._params)
        self._ready = [False] * n
        self._expect_hooks = _lib.hv_size() > 1
        self._hooks_fired = False
        self._queued = False
        self._scale = 1.0 / max(_lib.hv_size(), 1)
        for b in self._buckets:
            b.left = len(b.params)
            b.handle = None
        self._in_flight = []
        self.last_backward = {"buckets_in_backward": 0, "buckets": 0}

    def _drop_cut_short(self):
        """Waits out (ignoring their errors) the allreduces of a step that an exception cut
        short, e.g. a peer's failure under hv.torch.elastic.run: the next step starts afresh."""
        flying, self._in_flight = self._in_flight, []
        for b in flying:
            if b.handle is not None:
                try:
                    _ops.synchronize(b.handle)
                except Exception:  # noqa: BLE001  (that step's failure, already raised)
                    pass
                b.handle = None

    # ---- backward ----------------------------------------------------------------------------

    def _on_grad(self, i):
        """Parameter i's gradient is accumulated (its hook, inside backward)."""
        self._used[i] = 1
        if not self._expect_hooks:
            return  # no_sync(), evaluation, or one rank: gradients stay local
        if self._ready[i]:
            raise RuntimeError(
                "hv.torch.parallel.DistributedDataParallel: parameter %s received its gradient "
                "twice in one backward (a second backward over the same forward, or reentrant "
                "checkpointing): not supported, as in torch's DDP without static_graph" %
                self._param_names[i])
        if not self._hooks_fired:
            self._hooks_fired = True
            for j in self._unused_at_forward:  # torch marks them at the first hook too
                if not self._ready[j]:
                    self._mark_ready(j)
        self._mark_ready(i)
        if not self._queued:
            self._queued = True
            _engine.queue_callback(self._finalize)

    def _mark_ready(self, i):
        self._ready[i] = True
        b, j = self._bucket_of[i]
        g = self._params[i].grad
        if g is None:
            b.slots[j].zero_()
        else:
            if g.layout != torch.strided:
                raise TypeError("hv.torch.parallel.DistributedDataParallel: parameter %s has "
                                "a %s gradient; DDP reduces dense gradients" %
                                (self._param_names[i], g.layout))
            torch.mul(g, self._scale, out=b.slots[j])  # torch's reducer: grad / world size
        b.left -= 1
        if b.left == 0:
            self._launch(b, during_backward=True)

    def _launch(self, b, during_backward):
        b.handle = _ops.allreduce_async_(b.buf, name=b.name, op=_ops.Sum)
        self._in_flight.append(b)
        self.last_backward["buckets"] += 1
        if during_backward:
            self.last_backward["buckets_in_backward"] += 1

    def _finalize(self):
        """At the end of backward: the parameters whose hooks did not fire (unused), then every
        bucket waited for and copied back into .grad."""
        self._queued = False
        self._expect_hooks = False
        missing = [i for i, r in enumerate(self._ready) if not r]
        if missing and not (self.find_unused_parameters or self.static_graph):
            names = [self._param_names[i] for i in missing]
            self._drop_cut_short()
            raise RuntimeError(
                "hv.torch.parallel.DistributedDataParallel: %d parameter(s) received no "
                "gradient in this backward: %s%s. Pass find_unused_parameters=True if the "
                "forward does not use every parameter (as with torch's DDP)" %
                (len(names), ", ".join(names[:10]), ", ..." if len(names) > 10 else ""))
        used_handle = None
        if self.find_unused_parameters or self.static_graph:
            for i in missing:
                self._ready[i] = True
                b, j = self._bucket_of[i]
                g = self._params[i].grad
                if g is None:
                    b.slots[j].zero_()
                else:
                    torch.mul(g, self._scale, out=b.slots[j])
                b.left -= 1
                if b.left == 0:
                    self._launch(b, during_backward=False)
            used = self._used.clone()
            used_handle = _ops.allreduce_async_(used, name=self._prefix + "used", op=_ops.Sum)
        flying, self._in_flight = self._in_flight, []
        handles = [b.handle for b in flying]
        for b in flying:
            b.handle = None
        if used_handle is not None:
            handles.append(used_handle)
        _wait_all(handles)
        self._used.zero_()
        global_used = used if used_handle is not None else None
        for b in self._buckets:
            for j, i in enumerate(b.params):
                if global_used is not None and int(global_used[i]) == 0:
                    continue  # unused on every rank: .grad untouched (torch)
                p = self._params[i]
                if p.grad is None:
                    p.grad = b.slots[j].clone()
                else:
                    p.grad.copy_(b.slots[j])

    # ---- torch DDP's other methods -----------------------------------------------------------

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes under no_sync() accumulate gradients locally; the first backward of
        a forward outside it reduces the sum (torch's no_sync)."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _set_static_graph(self):
        self.static_graph = True

    @staticmethod
    def _set_params_and_buffers_to_ignore_for_model(module, params_and_buffers_to_ignore):
        module._ddp_params_and_buffers_to_ignore = list(params_and_buffers_to_ignore)

    def join(self, divide_by_initial_world_size=True, enable=True,
             throw_on_early_termination=False):
        raise NotImplementedError(
            "hv.torch.parallel.DistributedDataParallel.join (torch's uneven-inputs context "
            "manager) is not supported: call hv.torch.join() when a rank runs out of data, "
            "or give every rank the same number of batches (docs/python.md)")

    def join_hook(self, **kwargs):
        self.join()

    def register_comm_hook(self, state, hook):
        raise NotImplementedError(
            "hv.torch.parallel.DistributedDataParallel.register_comm_hook is not supported: "
            "hv averages each bucket with libhv's allreduce; for fp16 on the wire use "
            "hv.torch.DistributedOptimizer(compression=hv.torch.Compression.fp16) "
            "(docs/python.md, From DistributedDataParallel)")

    def _register_fused_optim(self, optim, *args, **kwargs):
        raise NotImplementedError(
            "hv.torch.parallel.DistributedDataParallel._register_fused_optim is not supported")

    def __getstate__(self):
        raise NotImplementedError("hv.torch.parallel.DistributedDataParallel cannot be pickled: "
                                  "save its state_dict() (or self.module's)")


def _is_global_set(ps):
    from .process_sets import global_process_set
    return ps is global_process_set


def _wait_all(handles):
    """Waits for every handle, then raises the first error (if any)."""
    first = None
    for h in handles:
        try:
            _ops.synchronize(h)
        except Exception as exc:  # noqa: BLE001  (wait for all before raising the first)
            first = first or exc
    if first is not None:
        raise first


# ---- torch.distributed's names for what a DDP script asks ----------------------------------

def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None):
    """torch.distributed.init_process_group's signature over hv.torch.init(): hv joins the job
    from the environment hvsubmit's agent gives the worker, so backend, init_method, timeout,
    store and group_name are accepted and not used; world_size and rank, when given, must be
    what hv assigned (else ValueError)."""
    del backend, init_method, timeout, store, group_name, pg_options
    from . import init
    init()
    for what, given, got in (("world_size", world_size, _lib.hv_size()),
                             ("rank", rank, _lib.hv_rank())):
        if given is not None and given != -1 and int(given) != got:
            raise ValueError("hv.torch.parallel.init_process_group: %s=%d, but hv assigned %d "
                             "(hv takes rank and size from the job: leave them out)" %
                             (what, given, got))


def is_initialized():
    """torch.distributed.is_initialized: hv.torch.init() has been called."""
    return _lib.hv_size() >= 1


def get_rank(group=None):
    """torch.distributed.get_rank: this worker's rank now (hv.torch.rank())."""
    del group
    return _lib.hv_rank()


def get_world_size(group=None):
    """torch.distributed.get_world_size: the job's size now (hv.torch.size())."""
    del group
    return _lib.hv_size()


def barrier(group=None, async_op=False, device_ids=None):
    """torch.distributed.barrier (blocking; async_op is refused)."""
    del group, device_ids
    if async_op:
        raise NotImplementedError("hv.torch.parallel.barrier: async_op=True is not supported")
    from . import barrier as _barrier
    _barrier()


def destroy_process_group(group=None):
    """torch.distributed.destroy_process_group: hv.torch.shutdown()."""
    del group
    from . import shutdown
    shutdown()


__all__ = ["DistributedDataParallel", "init_process_group", "is_initialized", "get_rank",
           "get_world_size", "barrier", "destroy_process_group"]
