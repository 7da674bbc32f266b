"""hv._lib: loads libhv.so with ctypes and declares the C functions of <hv/hv.h> that the
Python package calls. It is the only module that touches ctypes prototypes; everything above it
sees Python functions that raise hv exceptions (hv.errors) instead of returning hv_err codes.

Where libhv.so comes from, in this order:
  1. HV_LIBRARY, a path to the library (when set, nothing else is tried). It is refused, as ssh
     refuses a key file others could change, when someone other than this user and root could
     replace what it names: the library (after symbolic links) writable by every user or owned
     by another user, or a directory above it writable by every user without the sticky bit
     (/tmp's) or owned by another user. Whoever can replace it runs code as every program that
     imports hv. The checked real path is the one loaded.
  2. libhv.so inside this package's directory (the build tree links build/lib/libhv.so there);
  3. libhv.so.0, then libhv.so, on the dynamic loader's path (LD_LIBRARY_PATH, ldconfig).
When none loads, ImportError names every place tried and why each failed.

ctypes.CDLL releases the GIL around every foreign call, so a blocking collective leaves other
Python threads (a data loader) running.
"""

import ctypes
import os
import stat

from . import _node, errors

_HERE = os.path.dirname(os.path.abspath(__file__))


def _owner(uid):
    try:
        import pwd
        return "user %s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %d" % uid


def unsafe_library(path):
    """Why someone other than this user and root could replace the library at path (its real
    path, and every directory above that), or None. A library that cannot be read is not
    judged here: loading it says why."""
    uid = os.geteuid()
    real = os.path.realpath(path)
    at = real
    while True:
        try:
            st = os.stat(at)
        except OSError:
            return None
        what = "the library" if at == real else "the directory"
        if st.st_uid not in (0, uid):
            return "%s %s is owned by %s" % (what, at, _owner(st.st_uid))
        sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
        if st.st_mode & stat.S_IWOTH and not sticky_dir:
            return "%s %s is writable by every user (mode %04o)" % (
                what, at, stat.S_IMODE(st.st_mode))
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent


def _load():
    tried = []
    env = os.environ.get("HV_LIBRARY")
    if env:
        # A bare name (no /) is the dynamic loader's to find, as for dlopen.
        named = os.sep in env
        why = unsafe_library(env) if named and os.path.exists(env) else None
        if why is not None:
            real = os.path.realpath(env)
            if real != os.path.abspath(env):
                env += " (which leads to %s)" % real
            msg = ("refusing HV_LIBRARY=%s: %s; anyone who can replace it runs code as every "
                   "program that imports hv. Make it and its directories yours or root's and not "
                   "writable by others (chmod o-w, chown), or point HV_LIBRARY at a copy that is"
                   % (env, why))
            _node.refused(msg)
            raise ImportError("hv: " + msg)
        # The real path that was checked is the one loaded (a link changed since is not followed).
        candidates = [("HV_LIBRARY=" + env, os.path.realpath(env) if named else env, env)]
    else:
        tried.append("HV_LIBRARY (unset)")
        here = os.path.join(_HERE, "libhv.so")
        candidates = [(here, here, here),
                      ("libhv.so.0 on the loader path", "libhv.so.0", "libhv.so.0"),
                      ("libhv.so on the loader path", "libhv.so", "libhv.so")]
    for label, path, shown in candidates:
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (no such file)" % label)
            continue
        try:
            return ctypes.CDLL(path), shown
        except OSError as exc:
            tried.append("%s (%s)" % (label, exc))
    _node.missing("hv (libhv)", "cannot load libhv: tried " + "; ".join(tried))
    raise ImportError(
        "hv: cannot load libhv: tried " + "; ".join(tried) +
        ". Build it (cmake --build build: build/lib/libhv.so) and set HV_LIBRARY to its path, "
        "or put it beside the hv package.")


lib, path = _load()

_c_int = ctypes.c_int
_c_size = ctypes.c_size_t
_vp = ctypes.c_void_p
_handle = ctypes.c_uint64


def _proto(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


hv_version = _proto("hv_version", ctypes.c_char_p)
hv_strerror = _proto("hv_strerror", ctypes.c_char_p, _c_int)
hv_errname = _proto("hv_errname", ctypes.c_char_p, _c_int)
hv_init = _proto("hv_init", _c_int)
hv_shutdown = _proto("hv_shutdown", _c_int)
hv_abort = _proto("hv_abort", _c_int)
hv_rank = _proto("hv_rank", _c_int)
hv_size = _proto("hv_size", _c_int)
hv_local_rank = _proto("hv_local_rank", _c_int)
hv_local_size = _proto("hv_local_size", _c_int)
hv_host_name = _proto("hv_host_name", ctypes.c_char_p)
hv_last_error = _proto("hv_last_error", ctypes.c_char_p, ctypes.c_char_p, _c_size)
hv_dtype_size = _proto("hv_dtype_size", _c_size, _c_int)
hv_allreduce = _proto("hv_allreduce", _c_int, _vp, _vp, _c_size, _c_int, _c_int)
hv_allreduce_async = _proto("hv_allreduce_async", _c_int, ctypes.c_char_p, _vp, _vp, _c_size,
                            _c_int, _c_int, ctypes.POINTER(_handle))
hv_allreduce_named = _proto("hv_allreduce_named", _c_int, ctypes.c_char_p, _vp, _vp, _c_size,
                            _c_int, _c_int)


class Tensor(ctypes.Structure):
    """struct hv_tensor_s: one tensor of hv_allreduce_group_async (all pointers borrowed)."""
    _fields_ = [("name", ctypes.c_char_p), ("inp", _vp), ("out", _vp), ("count", _c_size),
                ("dtype", _c_int)]


hv_allreduce_group_async = _proto("hv_allreduce_group_async", _c_int, ctypes.POINTER(Tensor),
                                  _c_size, _c_int, ctypes.POINTER(_handle))
hv_broadcast = _proto("hv_broadcast", _c_int, _vp, _c_size, _c_int, _c_int)
hv_broadcast_named = _proto("hv_broadcast_named", _c_int, ctypes.c_char_p, _vp, _c_size, _c_int,
                            _c_int)
hv_broadcast_async = _proto("hv_broadcast_async", _c_int, ctypes.c_char_p, _vp, _c_size, _c_int,
                            _c_int, ctypes.POINTER(_handle))
# Collectives on declared memory (hv.h, "collectives on declared memory"): device -1 is host
# memory; a CUDA device ordinal with the cudaStream_t (an int) the caller's work ran on.
hv_cuda_built = _proto("hv_cuda_built", _c_int)
hv_allreduce_on = _proto("hv_allreduce_on", _c_int, _vp, _vp, _c_size, _c_int, _c_int, _c_int,
                         _vp)
hv_allreduce_async_on = _proto("hv_allreduce_async_on", _c_int, ctypes.c_char_p, _vp, _vp,
                               _c_size, _c_int, _c_int, _c_int, _vp, ctypes.POINTER(_handle))
hv_broadcast_on = _proto("hv_broadcast_on", _c_int, _vp, _c_size, _c_int, _c_int, _c_int, _vp)
hv_broadcast_async_on = _proto("hv_broadcast_async_on", _c_int, ctypes.c_char_p, _vp, _c_size,
                               _c_int, _c_int, _c_int, _vp, ctypes.POINTER(_handle))
hv_allgather = _proto("hv_allgather", _c_int, _vp, _c_size, _c_int, _vp, _c_size,
                      ctypes.POINTER(_c_size))
hv_allgather_async = _proto("hv_allgather_async", _c_int, ctypes.c_char_p, _vp, _c_size, _c_int,
                            _vp, _c_size, ctypes.POINTER(_c_size), ctypes.POINTER(_handle))
hv_join = _proto("hv_join", _c_int, ctypes.POINTER(_c_int))
hv_cross_rank = _proto("hv_cross_rank", _c_int)
hv_cross_size = _proto("hv_cross_size", _c_int)
hv_shutdown_at_exit = _proto("hv_shutdown_at_exit", _c_int)
hv_barrier = _proto("hv_barrier", _c_int)
hv_wait = _proto("hv_wait", _c_int, _handle)
hv_test = _proto("hv_test", _c_int, _handle, ctypes.POINTER(_c_int))

# enum hv_dtype and enum hv_op (values are part of libhv's ABI)
FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT32, INT64, UINT8 = range(7)
SUM, AVG, MIN, MAX, PRODUCT = range(5)


def last_error():
    """libhv's account of its last data-plane failure, or ""."""
    buf = ctypes.create_string_buffer(1024)
    hv_last_error(buf, len(buf))
    return buf.value.decode("utf-8", "replace")


def check(rc, what):
    """Raises the hv exception for a non-zero hv_err rc; what names the call."""
    if rc != 0:
        raise errors.from_code(rc, what, hv_errname(rc).decode(), hv_strerror(rc).decode(),
                               last_error())


# ---- actors (<hv/actor.h>): used by hv.actor ----------------------------------------------------

_u32 = ctypes.c_uint32

# The callbacks of hv_actor_class_t. ctypes takes the GIL around each call into Python (the
# dispatcher thread is not a Python thread: it gets a thread state for the call).
ACTOR_CREATE = ctypes.CFUNCTYPE(_c_int, _vp, _vp, _c_size, ctypes.POINTER(_vp))
ACTOR_CALL = ctypes.CFUNCTYPE(_c_int, _vp, ctypes.c_char_p, _vp, _c_size, _vp)
ACTOR_DESTROY = ctypes.CFUNCTYPE(None, _vp)
ACTOR_SAVE = ctypes.CFUNCTYPE(_c_int, _vp, _vp)
ACTOR_LOAD = ctypes.CFUNCTYPE(_c_int, _vp, _vp, _c_size)


class ActorClass(ctypes.Structure):
    """hv_actor_class_t (field order and types are libhv's ABI)."""
    _fields_ = [("size", _c_size), ("name", ctypes.c_char_p), ("create", ACTOR_CREATE),
                ("call", ACTOR_CALL), ("destroy", ACTOR_DESTROY), ("save", ACTOR_SAVE),
                ("load", ACTOR_LOAD), ("ud", _vp)]


class ActorServerConfig(ctypes.Structure):
    """hv_actor_server_config_t."""
    _fields_ = [("size", _c_size), ("class_name", ctypes.c_char_p), ("arg", _vp),
                ("arg_len", _c_size), ("listen", ctypes.c_char_p), ("secret", ctypes.c_char_p),
                ("state_in", ctypes.c_char_p), ("state_out", ctypes.c_char_p),
                ("addr_file", ctypes.c_char_p), ("max_frame", _u32), ("max_conns", _u32),
                ("handshake_timeout_ms", _u32)]


class ActorConnectConfig(ctypes.Structure):
    """hv_actor_connect_config_t."""
    _fields_ = [("size", _c_size), ("connect_timeout_ms", _u32), ("max_pending", _u32),
                ("send_timeout_ms", _u32), ("resolve_timeout_ms", _u32),
                ("max_call_retries", _u32)]


hv_actor_out_append = _proto("hv_actor_out_append", _c_int, _vp, _vp, _c_size)
# Variadic in C; called only as (out, b"%s", message), so the text is never a format.
hv_actor_out_errorf = _proto("hv_actor_out_errorf", None, _vp, ctypes.c_char_p, ctypes.c_char_p)
hv_actor_register = _proto("hv_actor_register", _c_int, ctypes.POINTER(ActorClass))
hv_actor_server_start = _proto("hv_actor_server_start", _c_int,
                               ctypes.POINTER(ActorServerConfig), ctypes.POINTER(_vp))
hv_actor_server_port = _proto("hv_actor_server_port", _c_int, _vp)
hv_actor_server_save = _proto("hv_actor_server_save", _c_int, _vp, ctypes.c_char_p)
hv_actor_server_stop = _proto("hv_actor_server_stop", _c_int, _vp)
hv_actor_connect = _proto("hv_actor_connect", _c_int, ctypes.c_char_p, ctypes.c_char_p,
                          ctypes.POINTER(ActorConnectConfig), ctypes.POINTER(_vp), _vp, _c_size)
hv_actor_call_async = _proto("hv_actor_call_async", _c_int, _vp, ctypes.c_char_p, _vp, _c_size,
                             ctypes.POINTER(_vp))
hv_future_wait = _proto("hv_future_wait", _c_int, _vp, _u32, ctypes.POINTER(_vp),
                        ctypes.POINTER(_c_size))
hv_future_error = _proto("hv_future_error", ctypes.c_char_p, _vp, ctypes.POINTER(_c_int))
hv_future_destroy = _proto("hv_future_destroy", None, _vp)
hv_future_sends = _proto("hv_future_sends", _u32, _vp)
hv_actor_close = _proto("hv_actor_close", None, _vp)
hv_actor_lookup = _proto("hv_actor_lookup", _c_int, ctypes.c_char_p, ctypes.c_char_p,
                         ctypes.c_char_p, ctypes.c_char_p, _u32,
                         ctypes.POINTER(ActorConnectConfig), ctypes.POINTER(_vp), _vp, _c_size)

# hv_err values the actor binding tests for (libhv's ABI; only appended to)
EINVAL, ENOMEM, ETIMEDOUT, ECLOSED, ECANCELED = 1, 2, 3, 4, 5
EINTERNAL, ENOTFOUND, ENOTSUP, EUNAVAIL, ETOOBIG, EAUTH, EINDOUBT, EREMOTE = \
    10, 11, 16, 14, 15, 19, 20, 21


def errname(code):
    return hv_errname(code).decode()


def strerror(code):
    return hv_strerror(code).decode()
