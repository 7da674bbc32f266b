"""hv.errors: the exceptions of the hv Python package and the mapping from libhv's hv_err codes.

Every failed libhv call surfaces as one of these (never as a crash of the interpreter):

  HvError                 base class (a RuntimeError); .code and .errname give libhv's code
  NotInitializedError     a call before hv.torch.init() (also a ValueError, as in Horovod)
  HvInternalError         a collective failed because a peer failed, stalled or closed the data
                          plane (HV_EPEER, HV_ETIMEDOUT, HV_ECANCELED, HV_EIO): Horovod's
                          HorovodInternalError; shut down and initialise again (elastic: restore)
  HostsUpdatedInterrupt   the job's membership changed (HV_ERESET): Horovod's exception of the
                          same name
  MismatchError           ranks disagree about one operation (HV_EPROTO: same name, different
                          size, dtype, op or root); also a ValueError
  InvalidArgumentError    libhv refused an argument (HV_EINVAL); also a ValueError

Actor calls (hv.actor) raise these, which tell whether the call can have run:

  ActorError              base class of the failures of an actor call or connection
  ActorNotDeliveredError  the call never reached the actor, nothing ran: safe to send again
                          (no connection, the connection was lost before, over a limit)
  ActorAuthError          the actor refused the connection: the secrets differ (also a
                          PermissionError); a subclass of ActorNotDeliveredError
  ActorInDoubtError       the call was sent and its outcome is unknown: it may or may not have
                          run (HV_EINDOUBT: the actor died or the connection broke; HV_ECANCELED:
                          the handle was closed with the call in flight)
  ActorTimeoutError       no outcome within the timeout (also a TimeoutError); a subclass of
                          ActorInDoubtError
  ActorMethodError        the method ran and raised or returned an error (HV_EREMOTE);
                          .remote_code, .remote_errname and .remote_message say which

hv.actor re-exports the actor exceptions. hv.torch re-exports the first six and adds the alias
HorovodInternalError = HvInternalError, so that `except hvd.HorovodInternalError` in a ported
script works unchanged.
"""


class HvError(RuntimeError):
    """A libhv call failed. code: the hv_err value; errname: its name ("HV_EPEER")."""

    def __init__(self, message, code=None, errname=None):
        super().__init__(message)
        self.code = code
        self.errname = errname


class NotInitializedError(HvError, ValueError):
    pass


class HvInternalError(HvError):
    pass


class HostsUpdatedInterrupt(HvError):
    pass


class MismatchError(HvError, ValueError):
    pass


class InvalidArgumentError(HvError, ValueError):
    pass


class ActorError(HvError):
    """An actor call or connection failed. address: the actor's "host:port"; method: the
    method called, or None for a connection."""

    def __init__(self, message, code=None, errname=None, address=None, method=None):
        super().__init__(message, code, errname)
        self.address = address
        self.method = method


class ActorNotDeliveredError(ActorError):
    pass


class ActorAuthError(ActorNotDeliveredError, PermissionError):
    pass


class ActorInDoubtError(ActorError):
    pass


class ActorTimeoutError(ActorInDoubtError, TimeoutError):
    pass


class ActorMethodError(ActorError):
    """The method ran and failed. remote_code / remote_errname: the hv_err it returned (a Python
    actor: HV_EINVAL for ValueError and TypeError, HV_ENOTFOUND for an unknown method, an
    HvError's own code, else HV_EINTERNAL); remote_message: its message (a Python actor:
    "ExceptionType: text (at file:line in function)")."""

    def __init__(self, message, code=None, errname=None, address=None, method=None,
                 remote_code=None, remote_errname=None, remote_message=None):
        super().__init__(message, code, errname, address, method)
        self.remote_code = remote_code
        self.remote_errname = remote_errname
        self.remote_message = remote_message


_BY_CODE = {
    1: InvalidArgumentError,  # HV_EINVAL
    3: HvInternalError,  # HV_ETIMEDOUT: a peer silent for HV_PEER_TIMEOUT_MS
    4: HvInternalError,  # HV_ECLOSED
    5: HvInternalError,  # HV_ECANCELED: hv_abort or shutdown with operations pending
    6: MismatchError,  # HV_EPROTO
    7: NotInitializedError,  # HV_ESTATE
    8: HvInternalError,  # HV_EPEER
    9: HvInternalError,  # HV_EIO
    18: HostsUpdatedInterrupt,  # HV_ERESET
    # Only actor calls return these two. HV_EAUTH stays an HvError here: hv_init returns it for
    # a wrong worker secret; actor connections map it through actor_error below.
    20: ActorInDoubtError,  # HV_EINDOUBT
    21: ActorMethodError,  # HV_EREMOTE
}

# An actor call's outcome (hv_actor_call_async, hv_future_wait) -> its exception class.
_ACTOR_BY_CODE = {
    1: InvalidArgumentError,  # HV_EINVAL: refused before sending
    2: ActorNotDeliveredError,  # HV_ENOMEM
    3: ActorTimeoutError,  # HV_ETIMEDOUT: a wait ran out; the call may still run
    4: ActorNotDeliveredError,  # HV_ECLOSED: the handle is closed
    5: ActorInDoubtError,  # HV_ECANCELED: closed with the call in flight
    14: ActorNotDeliveredError,  # HV_EUNAVAIL: no connection, or lost before this call
    15: ActorNotDeliveredError,  # HV_ETOOBIG: over the frame limit, or too many in flight
    19: ActorAuthError,  # HV_EAUTH
    20: ActorInDoubtError,  # HV_EINDOUBT
    21: ActorMethodError,  # HV_EREMOTE
}


def actor_error(code, message, errname, address=None, method=None, connecting=False,
                remote_code=None, remote_errname=None, remote_message=None):
    """The exception for the hv_err code of an actor call (or, connecting=True, of
    hv_actor_connect: every failure there means nothing was sent)."""
    if connecting:
        cls = {1: InvalidArgumentError, 19: ActorAuthError}.get(code, ActorNotDeliveredError)
    else:
        cls = _ACTOR_BY_CODE.get(code, ActorError)
    if cls is InvalidArgumentError:
        return cls(message, code, errname)
    if cls is ActorMethodError:
        return cls(message, code, errname, address, method, remote_code, remote_errname,
                   remote_message)
    return cls(message, code, errname, address, method)


def from_code(code, what, errname, strerror, detail):
    """The exception for hv_err code raised by the call named what."""
    cls = _BY_CODE.get(code, HvError)
    msg = "%s: %s (%s)" % (what, strerror, errname)
    if detail:
        msg += ": " + detail
    if cls is NotInitializedError:
        msg += "; call hv.torch.init() first"
    return cls(msg, code, errname)
