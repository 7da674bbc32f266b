"""hv.actor: libhv's actors (<hv/actor.h>) from Python: declare an actor class, serve one
instance of it in this process, and call actors (Python or C) from anywhere. See docs/actors.md.

The actor process:

    import hv.actor

    @hv.actor.actor_class                # registered under its name, "Counter"
    class Counter:
        def __init__(self, arg):         # arg: the creation argument (bytes, b"" when none)
            self.n = int(arg or b"0")
        def add(self, data):             # a method: bytes in, bytes (or None) out
            self.n += int(data)
            return b"%d" % self.n
        def save(self):                  # optional: the state as bytes
            return b"%d" % self.n
        def load(self, state):           # optional: restore it, right after __init__
            self.n = int(state)

    hv.actor.serve(Counter, secret=..., listen="127.0.0.1:0")   # until SIGTERM / SIGINT

Callers:

    h = hv.actor.connect("127.0.0.1:41234", secret)
    h.call("add", b"5", timeout=10)      # -> b"5"
    f = h.call_async("add", b"1")        # many may be in flight; they run in the order sent
    f.result(timeout=10)                 # -> b"6"

Methods are the class's public callables (names not starting with "_"), except save and load.
Every method of an instance runs on libhv's one dispatcher thread, one call at a time; ctypes
takes the GIL around each call into Python. A Python exception in a method (or an unknown
method, or a result that is not bytes) becomes the method's error: the caller gets
ActorMethodError with the exception's type and text, and the actor goes on serving.

Pickle, explicitly opt-in: @actor_class(pickle=True) unpickles each call's arguments and pickles
its result, and a caller's handle.with_pickle() does the other side (h.add.remote(5) -> a
future, hv.actor.get(f)). Unpickling runs code of the sender's choosing: a pickle actor trusts
every caller that holds its secret with code execution in its process, and a pickle caller
trusts the actor as much. Use it only between parties that trust each other.

Every blocking call here releases the GIL (ctypes does around each libhv call) and has a bound.
"""

import ctypes
import itertools
import os
import pickle as _pickle
import re
import signal
import threading
import time
import traceback

from . import _lib, errors
from .errors import (ActorAuthError, ActorError, ActorInDoubtError, ActorMethodError,
                     ActorNotDeliveredError, ActorTimeoutError, HvError, InvalidArgumentError)

__all__ = ["actor_class", "serve", "start", "Server", "connect", "ActorHandle", "Future",
           "PickleHandle", "get", "pickle_args", "DEFAULT_TIMEOUT", "ActorError",
           "ActorNotDeliveredError", "ActorAuthError", "ActorInDoubtError", "ActorTimeoutError",
           "ActorMethodError"]

#: Seconds a call or a result() waits by default (timeout=None: no bound).
DEFAULT_TIMEOUT = 60.0

_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_METHOD_MAX = 255
_WAIT_SLICE_MS = 200  # a long wait is cut into slices so that Ctrl-C is seen between them
_LIFECYCLE = ("save", "load")


def _timeout_ms(timeout):
    """None: no bound (-1). Otherwise whole milliseconds, at least 0."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise InvalidArgumentError("timeout must be >= 0 seconds (or None), not %r" % (timeout,),
                                   _lib.EINVAL, "HV_EINVAL")
    return int(timeout * 1000 + 0.5)


def _as_bytes(data, what):
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError("%s must be bytes (or bytearray, memoryview), not %s%s" % (
        what, type(data).__name__, "; encode it" if isinstance(data, str) else ""))


# ================================ the actor process ==============================================

class _Spec:
    """A registered Python actor class."""

    def __init__(self, cls, name, use_pickle):
        self.cls = cls
        self.name = name
        self.pickle = use_pickle
        self.methods = frozenset(
            n for n in dir(cls)
            if not n.startswith("_") and n not in _LIFECYCLE and callable(getattr(cls, n)))
        self.has_save = callable(getattr(cls, "save", None))
        self.has_load = callable(getattr(cls, "load", None))
        self.registered = False  # with libhv (at the first start)


_specs = {}  # class name -> _Spec
_by_ud = {}  # the ud given to libhv -> _Spec
_instances = {}  # the self given to libhv -> (spec, instance)
_keys = itertools.count(1)
_reg_mu = threading.Lock()


def actor_class(cls=None, *, name=None, pickle=False):
    """Declares a Python class an actor class, under name (default: the class's __name__; 1 to
    64 characters of [A-Za-z0-9_.-]). Use as @actor_class or @actor_class(name=..., pickle=...).

    The instance is built as cls(arg) with the creation argument's bytes (b"" when none); with
    pickle=True as cls(*args, **kwargs) from pickle_args(...) bytes (none: cls()). Each public
    method gets the call's argument (bytes) and returns bytes-like or None (b""); with
    pickle=True it gets the unpickled positional and keyword arguments and returns any picklable
    object. save(self) -> bytes and load(self, state) are optional (with pickle=True: any
    picklable object). Returns cls unchanged."""

    def register(c):
        n = name if name is not None else c.__name__
        if not isinstance(n, str) or not _NAME_RE.match(n):
            raise InvalidArgumentError(
                "actor class name %r: 1 to 64 characters of [A-Za-z0-9_.-]" % (n,),
                _lib.EINVAL, "HV_EINVAL")
        with _reg_mu:
            old = _specs.get(n)
            if old is not None and old.cls is not c:
                raise InvalidArgumentError("an actor class named %r is declared already (%r)" %
                                           (n, old.cls), _lib.EINVAL, "HV_EINVAL")
            _specs[n] = _Spec(c, n, bool(pickle))
        c._hv_actor_name = n
        return c

    return register(cls) if cls is not None else register


def pickle_args(*args, **kwargs):
    """The creation argument of a pickle=True class built as cls(*args, **kwargs)."""
    return _pickle.dumps((args, kwargs), protocol=_pickle.HIGHEST_PROTOCOL)


def _exc_code(exc):
    if isinstance(exc, HvError) and isinstance(exc.code, int) and exc.code > 0:
        return exc.code
    if isinstance(exc, (ValueError, TypeError)):
        return _lib.EINVAL
    return _lib.EINTERNAL


def _exc_text(exc):
    """ "ValueError: text (at file.py:12 in add)": the innermost frame, no full traceback."""
    text = "%s: %s" % (type(exc).__name__, exc)
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        fr = tb[-1]
        text += " (at %s:%d in %s)" % (os.path.basename(fr.filename), fr.lineno, fr.name)
    return text


# libhv's calls that _lib does not declare yet: a method's error message taken as it is (no
# printf format to get around), and why a handle failed.
_out_error = _lib._proto("hv_actor_out_error", None, _lib._vp, ctypes.c_char_p)
_last_error = _lib._proto("hv_actor_last_error", _lib._c_int, _lib._vp, ctypes.c_char_p,
                          _lib._c_size)


def _set_error(out, text):
    _out_error(out, text.replace("\0", " ").encode("utf-8", "replace"))


def _why(ptr, rc):
    """hv_actor_last_error of a handle: why its last failure (code rc) happened, or None."""
    buf = ctypes.create_string_buffer(1280)
    if _last_error(ptr, buf, len(buf)) != rc:
        return None
    return buf.value.decode("utf-8", "replace")


def _append(out, data, what):
    data = _as_bytes(data, what)  # TypeError for anything but bytes-like: the call's error
    if not data:
        return 0
    rc = _lib.hv_actor_out_append(out, data, len(data))
    if rc == _lib.ETOOBIG:
        _set_error(out, "%s: %d bytes are over the actor's frame limit" % (what, len(data)))
    return rc


def _class_of(key):
    entry = _instances.get(key)
    return entry[0].name if entry is not None else "?"


def _c_create(ud, arg, length, self_out):
    try:
        spec = _by_ud[ud]
        data = ctypes.string_at(arg, length) if length else b""
        if spec.pickle:
            args, kwargs = _pickle.loads(data) if data else ((), {})
            obj = spec.cls(*args, **kwargs)
        else:
            obj = spec.cls(data)
        key = next(_keys)
        _instances[key] = (spec, obj)
        self_out[0] = key
        return 0
    except BaseException as exc:  # noqa: B902 -- nothing may escape into C
        _warn("the constructor of actor class %s failed: %s" % (
            getattr(_by_ud.get(ud), "name", "?"), _exc_text(exc)))
        return _exc_code(exc)


def _c_call(key, method, arg, length, out):
    try:
        spec, obj = _instances[key]
        name = method.decode("utf-8", "replace")
        if name not in spec.methods:
            _set_error(out, "actor class %s has no method '%s'" % (spec.name, name))
            return _lib.ENOTFOUND
        data = ctypes.string_at(arg, length) if length else b""
        fn = getattr(obj, name)
        if spec.pickle:
            args, kwargs = _pickle.loads(data) if data else ((), {})
            res = _pickle.dumps(fn(*args, **kwargs), protocol=_pickle.HIGHEST_PROTOCOL)
        else:
            res = fn(data)
        if res is None:
            return 0
        return _append(out, res, "the result of %s" % name)
    except BaseException as exc:  # noqa: B902 -- a method's exception is the call's error
        _set_error(out, _exc_text(exc))
        return _exc_code(exc)


def _c_destroy(key):
    _instances.pop(key, None)


def _c_save(key, out):
    try:
        spec, obj = _instances[key]
        state = obj.save()
        if spec.pickle:
            state = _pickle.dumps(state, protocol=_pickle.HIGHEST_PROTOCOL)
        return _append(out, state if state is not None else b"", "the state saved")
    except BaseException as exc:  # noqa: B902
        _set_error(out, _exc_text(exc))
        _warn("save of actor class %s failed: %s" % (_class_of(key), _exc_text(exc)))
        return _exc_code(exc)


def _c_load(key, state, length):
    try:
        spec, obj = _instances[key]
        data = ctypes.string_at(state, length) if length else b""
        obj.load(_pickle.loads(data) if spec.pickle else data)
        return 0
    except BaseException as exc:  # noqa: B902
        _warn("load of actor class %s failed: %s" % (_class_of(key), _exc_text(exc)))
        return _exc_code(exc)


# One set of C callbacks for every class (kept alive for the life of the process: libhv keeps
# the pointers in its registry). Optional ones are given only to classes that have them.
_CB_CREATE = _lib.ACTOR_CREATE(_c_create)
_CB_CALL = _lib.ACTOR_CALL(_c_call)
_CB_DESTROY = _lib.ACTOR_DESTROY(_c_destroy)
_CB_SAVE = _lib.ACTOR_SAVE(_c_save)
_CB_LOAD = _lib.ACTOR_LOAD(_c_load)


def _warn(text):
    import sys
    sys.stderr.write("hv.actor: %s\n" % text)
    sys.stderr.flush()


def _c_register(spec):
    """Registers spec with libhv once (libhv has no unregistration: at most 4096 classes)."""
    with _reg_mu:
        if spec.registered:
            return
        ud = next(_keys)
        c = _lib.ActorClass()
        c.size = ctypes.sizeof(_lib.ActorClass)
        c.name = spec.name.encode()
        c.create = _CB_CREATE
        c.call = _CB_CALL
        c.destroy = _CB_DESTROY
        if spec.has_save:
            c.save = _CB_SAVE
        if spec.has_load:
            c.load = _CB_LOAD
        c.ud = ud
        rc = _lib.hv_actor_register(ctypes.byref(c))
        if rc != 0:
            raise errors.from_code(rc, "hv_actor_register(%s)" % spec.name, _lib.errname(rc),
                                   _lib.strerror(rc), "")
        _by_ud[ud] = spec
        spec.registered = True


def _spec_of(cls):
    if cls is None:
        n = os.environ.get("HV_ACTOR_CLASS")
        if not n:
            raise InvalidArgumentError("no actor class: pass one or set HV_ACTOR_CLASS",
                                       _lib.EINVAL, "HV_EINVAL")
    elif isinstance(cls, str):
        n = cls
    else:
        n = getattr(cls, "_hv_actor_name", None)
        if n is None or _specs.get(n) is None or _specs[n].cls is not cls:
            raise InvalidArgumentError("%r is not an actor class: declare it with "
                                       "@hv.actor.actor_class" % (cls,), _lib.EINVAL, "HV_EINVAL")
    spec = _specs.get(n)
    if spec is None:
        raise InvalidArgumentError("no Python actor class named %r (declared: %s)" % (
            n, ", ".join(sorted(_specs)) or "none"), _lib.EINVAL, "HV_EINVAL")
    return spec


def _opt(s):
    return os.fsencode(s) if s is not None else None


_servers = set()  # running Server objects, stopped at exit


class Server:
    """A running actor server in this process (hv_actor_server_t): one instance, a listening
    socket and libhv's dispatcher thread. Make one with start(); end it with stop() (or use it
    as a context manager). Running servers are stopped at interpreter exit."""

    def __init__(self, ptr, spec, cfg_keep):
        self._ptr = ptr
        self._spec = spec
        self._keep = cfg_keep
        self._mu = threading.Lock()
        self.port = _lib.hv_actor_server_port(ptr)

    @property
    def class_name(self):
        return self._spec.name

    def save(self, path):
        """Saves the instance's state to path (atomically) between two calls; blocks until
        written. Not from inside a method."""
        with self._mu:
            if self._ptr is None:
                raise errors.from_code(_lib.ECLOSED, "save", "HV_ECLOSED", "the server is stopped",
                                       "")
            rc = _lib.hv_actor_server_save(self._ptr, os.fsencode(path))
        if rc != 0:
            raise errors.from_code(rc, "hv_actor_server_save(%s)" % path, _lib.errname(rc),
                                   _lib.strerror(rc), "")

    def stop(self):
        """Stops: the calls received are answered, connections close (calls still in flight
        end in doubt on their callers), the state is saved to state_out when one was given, the
        instance is dropped. Bounded (2 s for replies, plus save). A second stop does nothing.
        Raises the save's error, if any (the server is stopped in every case)."""
        with self._mu:
            ptr, self._ptr = self._ptr, None
        if ptr is None:
            return
        _servers.discard(self)
        rc = _lib.hv_actor_server_stop(ptr)
        if rc != 0:
            raise errors.from_code(rc, "hv_actor_server_stop (saving the state)",
                                   _lib.errname(rc), _lib.strerror(rc), "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start(cls=None, arg=None, *, secret=None, listen=None, addr_file=None, state_in=None,
          state_out=None, max_frame=None):
    """Creates the instance (its constructor, then load(state_in's bytes) when state_in is given)
    and serves it on libhv's dispatcher thread; returns a Server. Every argument left None comes
    from the environment as in C (HV_ACTOR_CLASS, HV_ACTOR_ARG, HV_ACTOR_SECRET,
    HV_ACTOR_LISTEN, default 127.0.0.1:0, HV_ACTOR_ADDR_FILE, HV_ACTOR_STATE_IN / _OUT,
    HV_ACTOR_MAX_FRAME). cls: an @actor_class class or its name. secret: 16 to 256 bytes (str
    or bytes, no NUL), never logged."""
    spec = _spec_of(cls)
    _c_register(spec)
    cfg = _lib.ActorServerConfig()
    cfg.size = ctypes.sizeof(_lib.ActorServerConfig)
    cfg.class_name = spec.name.encode()
    keep = []
    if arg is not None:
        arg = _as_bytes(arg, "arg")
        buf = ctypes.create_string_buffer(arg, len(arg) or 1)
        keep.append(buf)
        cfg.arg = ctypes.addressof(buf)
        cfg.arg_len = len(arg)
    if secret is not None:
        cfg.secret = secret.encode() if isinstance(secret, str) else bytes(secret)
    cfg.listen = _opt(listen)
    cfg.addr_file = _opt(addr_file)
    cfg.state_in = _opt(state_in)
    cfg.state_out = _opt(state_out)
    cfg.max_frame = int(max_frame or 0)
    ptr = ctypes.c_void_p()
    # libhv's dispatcher thread inherits this thread's signal mask: it must not take SIGINT or
    # SIGTERM, which Python handles in its main thread.
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        rc = _lib.hv_actor_server_start(ctypes.byref(cfg), ctypes.byref(ptr))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if rc != 0:
        raise errors.from_code(rc, "hv_actor_server_start(%s)" % spec.name, _lib.errname(rc),
                               _lib.strerror(rc), "libhv's log says which setting")
    s = Server(ptr.value, spec, keep)
    _servers.add(s)
    return s


def serve(cls=None, arg=None, **kwargs):
    """The actor process's main loop: start(cls, arg, **kwargs), wait for SIGTERM or SIGINT (a
    preemption notice or a stop: the agent sends SIGTERM), then stop() (which saves to
    state_out). From the main thread only (Python runs signal handlers there). Returns after a
    clean stop; raises start's or stop's error."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("hv.actor.serve() runs in the main thread (it waits for SIGTERM); "
                           "elsewhere use hv.actor.start() and Server.stop()")
    got = []

    def on_signal(signum, frame):
        got.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        srv = start(cls, arg, **kwargs)
        try:
            while not got:
                time.sleep(0.1)  # a signal runs on_signal at once; the loop sees it next
        finally:
            srv.stop()
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _stop_all():
    for s in list(_servers):
        try:
            s.stop()
        except Exception:  # noqa: BLE001 -- at exit, a failed save was logged by libhv
            pass


import atexit  # noqa: E402

atexit.register(_stop_all)


# ================================ callers ========================================================

def connect(address, secret, *, timeout=5.0, max_pending=None, send_timeout=None):
    """Connects to the actor at address ("host:port") and proves knowledge of secret (str or
    bytes; it never leaves this process) while checking the actor knows it too. Bounded by
    timeout (seconds: TCP connect plus handshake). Returns an ActorHandle. Raises ActorAuthError
    (the secrets differ), ActorNotDeliveredError (nothing listens there, no answer in time, not
    an hv actor), InvalidArgumentError (a malformed address or secret)."""
    cfg = _lib.ActorConnectConfig()
    cfg.size = ctypes.sizeof(_lib.ActorConnectConfig)
    cfg.connect_timeout_ms = max(1, _timeout_ms(timeout)) if timeout is not None else 0
    cfg.max_pending = int(max_pending or 0)
    cfg.send_timeout_ms = max(1, _timeout_ms(send_timeout)) if send_timeout is not None else 0
    sec = secret.encode() if isinstance(secret, str) else bytes(secret)
    err = ctypes.create_string_buffer(1024)
    ptr = ctypes.c_void_p()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        rc = _lib.hv_actor_connect(address.encode(), sec, ctypes.byref(cfg), ctypes.byref(ptr),
                                   err, len(err))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if rc != 0:
        text = err.value.decode("utf-8", "replace") or _lib.strerror(rc)
        raise errors.actor_error(rc, "connecting to the actor at %s: %s (%s)" % (
            address, text, _lib.errname(rc)), _lib.errname(rc), address, None, connecting=True)
    return ActorHandle(ptr.value, address)


def lookup(name, namespace=None, *, head=None, credential=None, timeout=10.0,
           max_pending=None, send_timeout=None):
    """Finds the actor named name (in namespace, default "default") through the head
    (hv_actor_lookup: the head gives its address and its secret) and connects to it; an actor
    that is starting or restarting is waited for up to timeout seconds. head: "host:port", None
    = $HV_HEAD. credential: None = $HV_WORKER_SECRET in a job's worker, else the client token in
    $HV_TOKEN_FILE. Returns an ActorHandle. Raises ActorAuthError (the head refused the
    credential: HV_EAUTH) or ActorNotDeliveredError, nothing having been sent, with .errname
    HV_ENOTFOUND (no such actor, or it is dead: the message says why), HV_ETIMEDOUT (not alive
    in time), HV_EPERM, HV_EUNAVAIL (the head or the actor cannot be reached)."""
    cfg = _lib.ActorConnectConfig()
    cfg.size = ctypes.sizeof(_lib.ActorConnectConfig)
    cfg.max_pending = int(max_pending or 0)
    cfg.send_timeout_ms = max(1, _timeout_ms(send_timeout)) if send_timeout is not None else 0
    err = ctypes.create_string_buffer(1024)
    ptr = ctypes.c_void_p()
    enc = (lambda v: v.encode() if isinstance(v, str) else v)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        rc = _lib.hv_actor_lookup(enc(head), enc(credential), enc(namespace), name.encode(),
                                  max(1, _timeout_ms(timeout)) if timeout is not None else 0,
                                  ctypes.byref(cfg), ctypes.byref(ptr), err, len(err))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if rc != 0:
        text = err.value.decode("utf-8", "replace") or _lib.strerror(rc)
        raise errors.actor_error(rc, "looking up actor %r: %s (%s)" % (name, text, _lib.errname(rc)),
                                 _lib.errname(rc), None, None, connecting=True)
    return ActorHandle(ptr.value, "@" + name)


class ActorHandle:
    """A connection to one actor (hv_actor_t): calls from it run in the order sent (at most
    once each). Thread-safe: several threads may call on one handle. close() ends it (calls in
    flight then end with ActorInDoubtError); it is also closed when garbage-collected, but not
    while a Future of it is alive."""

    def __init__(self, ptr, address):
        self._ptr = ptr
        self.address = address
        self._mu = threading.Lock()  # _ptr, _busy, _closing
        self._cv = threading.Condition(self._mu)  # close() waits for sends in progress
        self._busy = 0  # sends in progress (hv_actor_close must not run beside one)
        self._closing = False

    def call_async(self, method, data=b""):
        """Sends a call of method with data (bytes) and returns its Future at once (blocks only
        while the socket's buffer is full, bounded). Raises ActorNotDeliveredError when it was
        not sent (the connection was lost before: connect again; over the frame limit or the
        calls-in-flight limit)."""
        return self._send(method, data, None)

    def call(self, method, data=b"", timeout=DEFAULT_TIMEOUT):
        """call_async(method, data).result(timeout): the result's bytes. Raises
        ActorMethodError (the method failed), ActorInDoubtError (sent, outcome unknown: the
        actor died or the connection broke), ActorTimeoutError (no outcome in time: the call
        may still run; its result is dropped), ActorNotDeliveredError (not sent)."""
        f = self._send(method, data, None)
        try:
            return f.result(timeout)
        finally:
            f.close()

    def with_pickle(self, timeout=DEFAULT_TIMEOUT):
        """A view of this handle for a pickle=True actor: handle.with_pickle().m.remote(x)
        (a Future whose result is the unpickled value), .m(x) (blocking, up to timeout). Opt-in:
        unpickling a result runs code of the actor's choosing."""
        return PickleHandle(self, timeout)

    def _send(self, method, data, decode):
        if not isinstance(method, str):
            raise TypeError("method must be a str, not %s" % type(method).__name__)
        m = method.encode("utf-8")
        if not 1 <= len(m) <= _METHOD_MAX or b"\0" in m:
            raise InvalidArgumentError("method name %r: 1 to %d bytes, no NUL" %
                                       (method, _METHOD_MAX), _lib.EINVAL, "HV_EINVAL")
        data = _as_bytes(data, "data")
        with self._mu:
            ptr = self._ptr
            if ptr is None:
                raise ActorNotDeliveredError(
                    "%s to the actor at %s: not sent: the handle is closed" % (method,
                                                                               self.address),
                    _lib.ECLOSED, "HV_ECLOSED", self.address, method)
            self._busy += 1
        fp = ctypes.c_void_p()
        why = None
        try:
            rc = _lib.hv_actor_call_async(ptr, m, data, len(data), ctypes.byref(fp))
            if rc != 0:
                why = _why(ptr, rc)  # while the handle cannot be closed under us
        finally:
            with self._mu:
                self._busy -= 1
                if self._closing and self._busy == 0:
                    self._cv.notify_all()
        if rc != 0:
            # libhv says why ("not sent: the actor closed the connection: ..."); "" only if a
            # failure was not recorded.
            why = (why or "").replace("not sent: ", "", 1) or _lib.strerror(rc)
            if rc == _lib.EUNAVAIL:
                why += "; connect again"
            raise errors.actor_error(rc, "%s to the actor at %s: not sent: %s (%s)" % (
                method, self.address, why, _lib.errname(rc)), _lib.errname(rc), self.address,
                method)
        return Future(self, fp.value, method, decode)

    def close(self):
        """Closes the connection; calls still in flight end with ActorInDoubtError (cancelled:
        they may have run). Futures stay usable. A second close does nothing."""
        with self._cv:
            ptr, self._ptr = self._ptr, None
            self._closing = True
            while self._busy > 0:  # a send in progress on another thread (bounded)
                self._cv.wait()
        if ptr is not None:
            _lib.hv_actor_close(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- interpreter teardown
            pass


class Future:
    """One call's outcome (hv_future_t). result(timeout) waits for it; the outcome, once known,
    is kept, so result() may be asked again. One thread at a time. `sends` says how many times
    the call was put on the wire (hv_future_sends)."""

    def __init__(self, handle, ptr, method, decode):
        self._handle = handle  # keeps the connection open while the call is pending
        self._ptr = ptr
        self.method = method
        self._decode = decode
        self._done = False
        self._value = None
        self._exc = None
        self._sends = 0  # hv_future_sends, read with the outcome
        self._mu = threading.Lock()

    @property
    def sends(self):
        """How many times the call was put on the wire (hv_future_sends): 1 for a first
        delivery; more for a call sent again (a lookup handle resends, after a move or a
        restart, the calls the actor said it did not run, and with max_call_retries those in
        doubt); 0 while the handle waits to reconnect. Once the outcome is known, the count it
        came with, so a caller tells at-most-once from at-least-once delivery (an exception
        from result() carries it as .sends too). Never blocks."""
        with self._mu:
            if self._ptr is not None:
                return int(_lib.hv_future_sends(self._ptr))
            return self._sends

    def _wait(self, ms):
        """One hv_future_wait of up to ms; records the outcome. True once it is known."""
        data = ctypes.c_void_p()
        n = ctypes.c_size_t()
        rc = _lib.hv_future_wait(self._ptr, ms, ctypes.byref(data), ctypes.byref(n))
        if rc == _lib.ETIMEDOUT:
            return False
        addr = self._handle.address
        if rc == 0:
            self._value = ctypes.string_at(data.value, n.value) if n.value else b""
        else:
            remote = ctypes.c_int(0)
            msg = (_lib.hv_future_error(self._ptr, ctypes.byref(remote)) or b"").decode(
                "utf-8", "replace")
            if rc == _lib.EREMOTE:
                rn = _lib.errname(remote.value)
                self._exc = ActorMethodError(
                    "%s on the actor at %s failed: %s (%s)" % (self.method, addr, msg, rn),
                    rc, "HV_EREMOTE", addr, self.method, remote.value, rn, msg)
            else:
                what = {_lib.EINDOUBT: "outcome unknown, it may or may not have run",
                        _lib.ECANCELED: "the handle was closed with the call in flight; it may "
                                        "have run"}.get(rc, "")
                self._exc = errors.actor_error(rc, "%s on the actor at %s: %s%s (%s)" % (
                    self.method, addr, msg, "; " + what if what else "", _lib.errname(rc)),
                    _lib.errname(rc), addr, self.method)
        self._sends = int(_lib.hv_future_sends(self._ptr))
        if self._exc is not None:
            self._exc.sends = self._sends
        self._done = True
        _lib.hv_future_destroy(self._ptr)
        self._ptr = None
        self._handle = None
        return True

    def done(self):
        """True once the outcome is known (never blocks)."""
        with self._mu:
            return self._done or self._wait(0)

    def result(self, timeout=DEFAULT_TIMEOUT):
        """The result (bytes; the unpickled value for a with_pickle() call) once the call
        completed, waiting up to timeout seconds (None: no bound). Raises ActorMethodError,
        ActorInDoubtError, or ActorTimeoutError when the wait ran out (the call goes on: ask
        again, or close())."""
        ms = _timeout_ms(timeout)
        with self._mu:
            if not self._done:
                if self._ptr is None:
                    raise ActorError("%s: the future is closed" % self.method)
                deadline = time.monotonic() + ms / 1000.0 if ms >= 0 else None
                slice_ms = _WAIT_SLICE_MS if ms < 0 else min(_WAIT_SLICE_MS, ms)
                while not self._wait(slice_ms):
                    if deadline is not None and time.monotonic() >= deadline:
                        raise ActorTimeoutError(
                            "%s on the actor at %s: no outcome within %.3g s; the call may still "
                            "run" % (self.method, self._handle.address, timeout),
                            _lib.ETIMEDOUT, "HV_ETIMEDOUT", self._handle.address, self.method)
                    slice_ms = _WAIT_SLICE_MS if deadline is None else min(
                        _WAIT_SLICE_MS, max(0, int((deadline - time.monotonic()) * 1000)))
            if self._exc is not None:
                raise self._exc
            if self._decode is not None:
                return self._decode(self._value)
            return self._value

    def close(self):
        """Drops the future; a call still in flight goes on and its result is dropped."""
        with self._mu:
            if self._ptr is not None:
                _lib.hv_future_destroy(self._ptr)
                self._ptr = None
                self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- interpreter teardown
            pass


def get(futures, timeout=DEFAULT_TIMEOUT):
    """ray.get's counterpart: the result of a Future, or the list of results of a list of them,
    all within timeout seconds in total (None: no bound)."""
    if isinstance(futures, Future):
        return futures.result(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    out = []
    for f in futures:
        out.append(f.result(None if deadline is None else max(0.0, deadline -
                                                               time.monotonic())))
    return out


def _unpickle(data):
    return _pickle.loads(data)


class _PickleMethod:
    def __init__(self, view, name):
        self._view = view
        self._name = name

    def remote(self, *args, **kwargs):
        """Sends the call; returns a Future of the unpickled result."""
        return self._view._handle._send(self._name, pickle_args(*args, **kwargs), _unpickle)

    def __call__(self, *args, **kwargs):
        return self.remote(*args, **kwargs).result(self._view._timeout)


class PickleHandle:
    """The pickle view of an ActorHandle (handle.with_pickle()): p.m.remote(*a, **kw) -> Future
    of the unpickled result; p.m(*a, **kw) blocking; p.call(method, args, kwargs, timeout) for a
    method whose name is one of this class's own attributes. Unpickling the results trusts the
    actor with code execution here."""

    def __init__(self, handle, timeout=DEFAULT_TIMEOUT):
        self._handle = handle
        self._timeout = timeout

    @property
    def handle(self):
        return self._handle

    def call(self, method, args=(), kwargs=None, timeout=DEFAULT_TIMEOUT):
        return self._handle._send(method, pickle_args(*args, **(kwargs or {})),
                                  _unpickle).result(timeout)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return _PickleMethod(self, name)
