"""hv.torch.elastic._c: the ctypes prototypes of libhv's elastic C API (<hv/elastic.h>) that
hv.torch.elastic calls: the state (create, buffers, commit, restore, sync, check, reset
callbacks, the retry loop) and libhv's exact step sampler (hv_sampler_*). Only declarations:
the classes that use them are in state.py, sampler.py and steps.py.
"""

import ctypes

from ... import _lib

state_p = ctypes.c_void_p


class ResetInfo(ctypes.Structure):
    """hv_reset_info_t."""
    _fields_ = [("old_size", ctypes.c_int), ("new_size", ctypes.c_int),
                ("old_generation", ctypes.c_uint32), ("new_generation", ctypes.c_uint32),
                ("rollback", ctypes.c_int), ("reason", ctypes.c_char_p)]


RESET_FN = ctypes.CFUNCTYPE(None, state_p, ctypes.POINTER(ResetInfo), ctypes.c_void_p)
TRAIN_FN = ctypes.CFUNCTYPE(ctypes.c_int, state_p, ctypes.c_void_p)


class SamplerConfig(ctypes.Structure):
    """hv_sampler_config_t."""
    _fields_ = [("size", ctypes.c_size_t), ("num_samples", ctypes.c_uint64),
                ("seed", ctypes.c_uint64), ("batch", ctypes.c_uint32),
                ("global_batch", ctypes.c_int), ("shuffle", ctypes.c_int)]


class SamplerStats(ctypes.Structure):
    """hv_sampler_stats_t."""
    _fields_ = [("size", ctypes.c_size_t), ("epoch", ctypes.c_uint64),
                ("processed", ctypes.c_uint64), ("duplicates", ctypes.c_uint64),
                ("remaining", ctypes.c_uint64), ("checksum", ctypes.c_uint64)]


l = _lib.lib  # noqa: E741
l.hv_state_create.restype = ctypes.c_int
l.hv_state_create.argtypes = [ctypes.POINTER(state_p)]
l.hv_state_destroy.restype = None
l.hv_state_destroy.argtypes = [state_p]
l.hv_state_add_buffer.restype = ctypes.c_int
l.hv_state_add_buffer.argtypes = [state_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
for _fn in ("hv_state_commit", "hv_state_restore", "hv_state_sync", "hv_state_check"):
    getattr(l, _fn).restype = ctypes.c_int
    getattr(l, _fn).argtypes = [state_p]
l.hv_state_on_reset.restype = ctypes.c_int
l.hv_state_on_reset.argtypes = [state_p, RESET_FN, ctypes.c_void_p]
l.hv_elastic_run.restype = ctypes.c_int
l.hv_elastic_run.argtypes = [state_p, TRAIN_FN, ctypes.c_void_p]
l.hv_state_removed.restype = ctypes.c_int
l.hv_state_removed.argtypes = [state_p]
l.hv_generation.restype = ctypes.c_uint32
l.hv_generation.argtypes = []
for _fn in ("hv_state_resets", "hv_state_rollbacks"):
    getattr(l, _fn).restype = ctypes.c_uint32
    getattr(l, _fn).argtypes = [state_p]
l.hv_sampler_create.restype = ctypes.c_int
l.hv_sampler_create.argtypes = [state_p, ctypes.c_char_p, ctypes.POINTER(SamplerConfig),
                                ctypes.POINTER(ctypes.c_void_p)]
l.hv_sampler_next.restype = ctypes.c_int
l.hv_sampler_next.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                              ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
l.hv_sampler_step_samples.restype = ctypes.c_uint64
l.hv_sampler_step_samples.argtypes = [ctypes.c_void_p]
l.hv_sampler_next_epoch.restype = ctypes.c_int
l.hv_sampler_next_epoch.argtypes = [ctypes.c_void_p]
l.hv_sampler_stats.restype = ctypes.c_int
l.hv_sampler_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(SamplerStats)]

HV_EINTERNAL = 10
HV_ESTATE = 7
