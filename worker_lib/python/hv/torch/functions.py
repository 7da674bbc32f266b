"""hv.torch.functions: Horovod's helpers for starting a job from one rank's state:
broadcast_parameters (a model's tensors, in place), broadcast_optimizer_state, broadcast_object
and allgather_object (small Python objects, pickled). Built on hv.torch._ops only.
"""

import io
import pickle

import torch

from .. import _lib
from . import _ops


def broadcast_parameters(params, root_rank):
    """Overwrites, in place, every tensor of params with root_rank's. params: a state_dict
    (model.state_dict()), or a list of (name, tensor) such as model.named_parameters().
    All tensors are in flight at once; returns when all are done."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
        if items and not all(isinstance(x, tuple) and len(x) == 2 for x in items):
            raise ValueError("hv.torch.broadcast_parameters: expected a dict (state_dict) or a "
                             "list of (name, tensor) pairs")
    handles = []
    for name, p in items:
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError("hv.torch.broadcast_parameters: %r is a %s, not a tensor" %
                             (name, type(p).__name__))
        handles.append(_ops.broadcast_async_(p.data if p.requires_grad else p, root_rank,
                                             name="broadcast." + str(name)))
    first_error = None
    for h in handles:
        try:
            _ops.synchronize(h)
        except Exception as exc:  # wait for all before raising the first
            first_error = first_error or exc
    if first_error is not None:
        raise first_error


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns root_rank's obj on every rank (pickled; for small objects). Blocking."""
    del name
    if process_set is not None:
        _ops._check_set(process_set, "broadcast_object")
    if _lib.hv_rank() == root_rank:
        buf = io.BytesIO()
        pickle.dump(obj, buf, protocol=pickle.HIGHEST_PROTOCOL)
        data = bytearray(buf.getvalue())
        ln = torch.tensor([len(data)], dtype=torch.int64)
    else:
        data = None
        ln = torch.zeros(1, dtype=torch.int64)
    _ops.broadcast_(ln, root_rank)
    n = int(ln.item())
    payload = (torch.frombuffer(data, dtype=torch.uint8) if data is not None and n > 0
               else torch.empty(n, dtype=torch.uint8))
    if n > 0:
        _ops.broadcast_(payload, root_rank)
    if data is not None:
        return obj
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None):
    """Returns the list of every rank's obj, in rank order (pickled). Blocking."""
    del name
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return [pickle.loads(b) for b in _ops._allgather_bytes(data)]


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Gives every rank root_rank's optimizer state (per-parameter state such as momentum and
    the param_groups' hyperparameters such as lr), through optimizer.load_state_dict. The state
    travels pickled once, at start or after a reset: not a per-step cost. model is accepted
    for Horovod's signature (its parameters are the optimizer's)."""
    del model
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("hv.torch.broadcast_optimizer_state: LBFGS is not supported")
    state = broadcast_object(optimizer.state_dict() if _lib.hv_rank() == root_rank else None,
                             root_rank)
    if _lib.hv_rank() != root_rank:
        optimizer.load_state_dict(state)
