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

hv.torch re-exports them and adds the alias HorovodInternalError = HvInternalError, so that
`except hvd.HorovodInternalError` in a ported script works unchanged.
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
}


def from_code(code, what, errname, strerror, detail):
    """The exception for hv_err code raised by the call named what."""
    cls = _BY_CODE.get(code, HvError)
    msg = "%s: %s (%s)" % (what, strerror, errname)
    if detail:
        msg += ": " + detail
    if cls is NotInitializedError:
        msg += "; call hv.torch.init() first"
    return cls(msg, code, errname)
