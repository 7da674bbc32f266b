#!/usr/bin/python3
"""elastic_words_test.py --pypath DIR: hv.torch.elastic.run decides on libhv's codes, not on the
head's words. libhv's hv_elastic_run is replaced by a fake that returns a code with a last
error in other words (the head's "job 3 has ended (failed)" in German, or none): the exception
run raises depends on the code alone. It used to look for " has ended" in the words, so a
reworded refusal came out as NotInitializedError ("call hv.torch.init() first").
"""
import sys


def main(argv):
    if len(argv) != 3 or argv[1] != "--pypath":
        print("usage: elastic_words_test.py --pypath DIR", file=sys.stderr)
        return 2
    sys.path.insert(0, argv[2])
    try:
        import torch  # noqa: F401  (hv.torch needs it)
    except ImportError:
        print("SKIP: torch is not installed")
        return 77
    from hv import _lib
    from hv.errors import HvError, HvInternalError, NotInitializedError
    from hv.torch import elastic
    from hv.torch.elastic import _c

    class FakeLib:
        """libhv with hv_elastic_run answering `rc` and the last error `words`."""

        def __init__(self, real, rc):
            self._real, self.rc = real, rc

        def __getattr__(self, name):
            return getattr(self._real, name)

        def hv_elastic_run(self, st, fn, ud):
            return self.rc

    class State(elastic.State):
        """An elastic state with no libhv handle behind it (run only passes the handle on)."""

        def __init__(self):  # noqa: D107  (no libhv state: the fake never touches it)
            pass

        def _handle(self):
            return None

    real_l, real_last = _c.l, _lib.last_error

    def run_with(rc, words):
        _c.l = FakeLib(real_l, rc)
        _lib.last_error = lambda: words
        try:
            elastic.run(lambda state: "trained")(State())
        except Exception as exc:  # the class and the message are what is checked
            return exc
        finally:
            _c.l, _lib.last_error = real_l, real_last
        return None

    failures = 0
    cases = [
        # (code, libhv's last error, the exception expected, a part of its message)
        (7, "job 3 has ended (failed): rank 1 on node-a exited with status 1", HvError,
         "job 3 has ended"),
        (7, "Auftrag 3 ist beendet (gescheitert)", HvError, "Auftrag 3 ist beendet"),
        (7, "", HvError, "no round to re-join"),
        (8, "ein Nachbar ist weg", HvInternalError, "ein Nachbar ist weg"),
    ]
    for code, words, want, part in cases:
        exc = run_with(code, words)
        ok = (type(exc) is want and not isinstance(exc, NotInitializedError) and
              part in str(exc) and getattr(exc, "code", None) == code)
        print("%s rc=%d %r -> %s: %s" % ("PASS" if ok else "FAIL", code, words,
                                          type(exc).__name__, exc))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
