#!/usr/bin/python3
"""actor_test.py: tests of hv.actor (the Python binding of libhv's actors) with real processes
and real sockets on 127.0.0.1.

    actor_test.py --pypath DIR [--examples DIR] SCENARIO
Scenarios:
  calls     a Python actor served in a subprocess, called from Python: results, 4 handles x 400
            calls in flight each from 4 threads (every handle's calls run and are answered in
            the order sent), a method that raises (ActorMethodError with its text, the actor
            goes on), an unknown method, a result that is not bytes, a wait that runs out, a
            wrong secret (ActorAuthError), nothing listening (ActorNotDeliveredError), the
            pickle layer both ways, an in-process server
  interop   a Python client calling the C example actor (examples/actor_counter), and the C
            client (examples/actor_call) calling a Python actor: results and exit statuses
  killed    the Python actor SIGKILLed with 200 calls in flight in a slow method: each ends with
            ActorInDoubtError within a bound (no hang), the next call is not delivered
  state     save/load: SIGTERM saves (HV_ACTOR_STATE_OUT), a restart loads (HV_ACTOR_STATE_IN),
            for a bytes class and a pickle class; Server.save between calls
Exit 77 (skip) in a sanitizer build whose runtimes could not be found (HV_TEST_SANITIZE); with
HV_TEST_PRELOAD the processes get them as LD_PRELOAD, as in torch_test.py.
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

MULT = float(os.environ.get("HV_TEST_TIMEOUT_MULTIPLIER", "1"))
SECRET = "py-actor-test-secret-0123456789"

A = None  # hv.actor, imported once the path is set
LIVE = []  # actor processes started, killed when the scenario ends


# ---- the actor classes (the served process imports this file too) ------------------------------

def declare():
    global A
    import hv.actor as actor
    A = actor

    @A.actor_class(name="pycounter")
    class PyCounter:
        def __init__(self, arg):
            self.n = int(arg or b"0")
            self.adds = 0
            self.notes = []

        def add(self, data):
            self.n += int(data)
            self.adds += 1
            return b"%d" % self.n

        def get(self, data):
            return b"%d" % self.n

        def echo(self, data):
            return data

        def note(self, data):  # records the order calls ran in
            self.notes.append(data)
            return data

        def notes_of(self, data):
            return b",".join(n.split(b":")[1] for n in self.notes if n.split(b":")[0] == data)

        def fail(self, data):
            raise ValueError("no such thing as %r" % data.decode())

        def wrong(self, data):
            return 42  # not bytes

        def slow(self, data):
            time.sleep(float(data or b"0"))
            return b"slept"

        def save(self):
            return b"%d %d" % (self.n, self.adds)

        def load(self, state):
            n, adds = state.split()
            self.n, self.adds = int(n), int(adds)

    @A.actor_class(name="pyobj", pickle=True)
    class PyObj:
        def __init__(self, start=None):
            self.items = list(start or [])

        def push(self, x, times=1):
            self.items.extend([x] * times)
            return len(self.items)

        def all(self):
            return self.items

        def save(self):
            return {"items": self.items}

        def load(self, state):
            self.items = state["items"]


# ---- helpers -----------------------------------------------------------------------------------

def expect_raises(exc_type, fn, *args, contains=None, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as exc:
        if contains is not None and contains not in str(exc):
            raise AssertionError("%r lacks %r" % (exc, contains))
        return exc
    raise AssertionError("%s did not raise %s" % (fn, exc_type.__name__))


class Actor:
    """An actor process: this file with --serve CLASS, or a C example binary."""

    def __init__(self, tmp, cls, argv=None, env=None, arg=None):
        self.addr_file = os.path.join(tmp, "%s.addr" % cls)
        if os.path.exists(self.addr_file):
            os.unlink(self.addr_file)
        e = dict(os.environ, HV_ACTOR_CLASS=cls, HV_ACTOR_SECRET=SECRET,
                 HV_ACTOR_LISTEN="127.0.0.1:0", HV_ACTOR_ADDR_FILE=self.addr_file)
        if arg is not None:
            e["HV_ACTOR_ARG"] = arg
        e.update(env or {})
        argv = argv or [sys.executable, os.path.abspath(__file__), "--serve"]
        self.log = open(os.path.join(tmp, "%s.log" % cls), "ab")
        self.p = subprocess.Popen(argv, env=e, stdout=self.log, stderr=self.log)
        LIVE.append(self.p)
        deadline = time.monotonic() + 10 * MULT
        while time.monotonic() < deadline:
            if os.path.exists(self.addr_file):
                self.address = open(self.addr_file).read().strip()
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.02)
        self.p.kill()
        raise AssertionError("actor %s did not listen (exit %s)" % (cls, self.p.poll()))

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.p.wait(10 * MULT)
        self.log.close()
        return rc


# ---- scenarios ---------------------------------------------------------------------------------

def scenario_calls(tmp, examples):
    act = Actor(tmp, "pycounter", arg="100")
    try:
        h = A.connect(act.address, SECRET)
        assert h.call("get") == b"100"
        assert h.call("add", b"5", timeout=5) == b"105"
        assert h.call("echo", bytearray(b"\0\1\2")) == b"\0\1\2"
        big = os.urandom(1 << 20)
        assert h.call("echo", memoryview(big)) == big

        # Ordering: 4 handles from 4 threads, 400 calls in flight each; every handle's results
        # rise by its own adds in the order it sent them.
        h.call("add", b"-105")
        handles = [A.connect(act.address, SECRET) for _ in range(4)]
        seen = {}

        def burst(i):
            fs = [handles[i].call_async("note", b"%d:%d" % (i, k)) for k in range(400)]
            seen[i] = [f.result(10 * MULT) for f in fs]

        ts = [threading.Thread(target=burst, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30 * MULT)
        for i in range(4):
            assert seen[i] == [b"%d:%d" % (i, k) for k in range(400)], "handle %d" % i
            ran = h.call("notes_of", b"%d" % i)
            assert ran == b",".join(b"%d" % k for k in range(400)), "handle %d ran %r" % (i, ran)
        fs = [h.call_async("add", b"1") for _ in range(500)]
        assert A.get(fs, timeout=10 * MULT) == [b"%d" % (k + 1) for k in range(500)]
        # hv_future_sends: each of these calls was put on the wire once (a first delivery), and
        # the count stays with the future after its outcome.
        assert [f.sends for f in fs] == [1] * 500, set(f.sends for f in fs)
        f = h.call_async("get")
        assert f.result(10 * MULT) == b"500" and f.sends == 1, f.sends

        # A method that raises: the caller's error carries it; the actor goes on.
        e = expect_raises(A.ActorMethodError, h.call, "fail", b"x",
                          contains="ValueError: no such thing as 'x'")
        assert e.remote_errname == "HV_EINVAL" and e.errname == "HV_EREMOTE", e.__dict__
        assert "actor_test.py" in e.remote_message and e.method == "fail"
        expect_raises(A.ActorMethodError, h.call, "fail", b"100% %s %n",
                      contains="no such thing as '100% %s %n'")  # the text as it is
        e = expect_raises(A.ActorMethodError, h.call, "nope", contains="has no method 'nope'")
        assert e.remote_errname == "HV_ENOTFOUND"
        expect_raises(A.ActorMethodError, h.call, "_private", contains="has no method")
        expect_raises(A.ActorMethodError, h.call, "save", contains="has no method")
        expect_raises(A.ActorMethodError, h.call, "wrong",
                      contains="TypeError: the result of wrong must be bytes")
        assert h.call("get") == b"500"

        # A wait that runs out: the call goes on and its result is still there afterwards.
        f = h.call_async("slow", b"0.5")
        t0 = time.monotonic()
        e = expect_raises(A.ActorTimeoutError, f.result, 0.1)
        assert isinstance(e, TimeoutError) and isinstance(e, A.ActorInDoubtError)
        assert time.monotonic() - t0 < 0.4 * MULT
        assert not f.done()
        assert f.result(5 * MULT) == b"slept" and f.done()

        # Refused before anything is sent.
        expect_raises(TypeError, h.call, "echo", "text", contains="encode it")
        expect_raises(ValueError, h.call, "x" * 256)
        e = expect_raises(A.ActorAuthError, A.connect, act.address, "another-secret-0123456789",
                          contains="wrong secret")
        assert isinstance(e, A.ActorNotDeliveredError) and isinstance(e, PermissionError)
        expect_raises(ValueError, A.connect, act.address, "short")
        h.close()
        expect_raises(A.ActorNotDeliveredError, h.call, "get", contains="handle is closed")
        for x in handles:
            x.close()
    finally:
        assert act.stop() == 0, "the actor did not stop cleanly on SIGTERM"
    log = open(os.path.join(tmp, "pycounter.log")).read()
    assert SECRET not in log, "the secret reached the log"
    assert "HV-ACTOR-AUTH" in log, log

    # Nothing listens there any more.
    e = expect_raises(A.ActorNotDeliveredError, A.connect, act.address, SECRET, timeout=2)
    assert e.errname == "HV_EUNAVAIL", e.errname

    # The pickle layer, opt-in on both sides.
    act = Actor(tmp, "pyobj")
    try:
        p = A.connect(act.address, SECRET).with_pickle()
        assert p.push({"a": 1}) == 1
        assert p.push.remote((2, 3), times=2).result() == 3
        assert A.get([p.push.remote(k) for k in range(3)]) == [4, 5, 6]
        assert p.all() == [{"a": 1}, (2, 3), (2, 3), 0, 1, 2]
        assert p.call("all") == p.all()
        expect_raises(A.ActorMethodError, p.push, contains="TypeError")
    finally:
        assert act.stop() == 0

    # A server inside this process, on a thread of libhv's, called from this thread.
    srv = A.start("pycounter", b"7", secret=SECRET)
    try:
        with A.connect("127.0.0.1:%d" % srv.port, SECRET) as h:
            assert h.call("add", b"3") == b"10"
    finally:
        srv.stop()
    srv.stop()  # a second stop does nothing
    expect_raises(ValueError, A.start, "nosuchclass", secret=SECRET)


def scenario_interop(tmp, examples):
    counter = os.path.join(examples, "actor_counter")
    call = os.path.join(examples, "actor_call")
    # Python calling the C actor.
    act = Actor(tmp, "counter", argv=[counter], arg="40")
    try:
        h = A.connect(act.address, SECRET)
        assert h.call("add", b"2") == b"42"
        fs = [h.call_async("add", b"1") for _ in range(300)]
        assert [f.result() for f in fs] == [b"%d" % (43 + k) for k in range(300)]
        e = expect_raises(A.ActorMethodError, h.call, "fail", contains="always fails")
        assert e.remote_errname == "HV_EINVAL"
        expect_raises(A.ActorMethodError, h.call, "nope", contains="counter has no method")
        f = h.call_async("crash")
        e = expect_raises(A.ActorInDoubtError, f.result, 10 * MULT, contains="HV_EINDOUBT")
        assert f.sends == 1 and e.sends == 1, (f.sends, e.sends)  # sent once, then in doubt
        h.close()
    finally:
        act.stop()
    # The C client calling the Python actor.
    act = Actor(tmp, "pycounter")
    try:
        env = dict(os.environ, HV_ACTOR_SECRET=SECRET)

        def run(*args, secret=SECRET):
            return subprocess.run([call, act.address] + list(args),
                                  env=dict(env, HV_ACTOR_SECRET=secret), capture_output=True,
                                  text=True, timeout=10 * MULT)

        r = run("add", "5")
        assert r.returncode == 0 and r.stdout == "5\n", (r.returncode, r.stdout, r.stderr)
        r = run("add", "37")
        assert r.stdout == "42\n", r.stdout
        r = run("fail", "zz")
        assert r.returncode == 1 and "ValueError: no such thing as 'zz'" in r.stderr and \
            "HV_EREMOTE" in r.stderr, (r.returncode, r.stderr)
        r = run("nope")
        assert r.returncode == 1 and "has no method 'nope'" in r.stderr, r.stderr
        r = run("get", secret="another-secret-0123456789")
        assert r.returncode == 2 and "HV_EAUTH" in r.stderr, (r.returncode, r.stderr)
        r = run("get")
        assert r.stdout == "42\n", r.stdout
    finally:
        assert act.stop() == 0


def scenario_killed(tmp, examples):
    act = Actor(tmp, "pycounter")
    h = A.connect(act.address, SECRET)
    assert h.call("slow", b"0") == b"slept"
    fs = [h.call_async("slow", b"0.05") for _ in range(200)]
    time.sleep(0.3)  # the actor is inside the calls now
    t0 = time.monotonic()
    act.p.kill()
    act.p.wait()
    in_doubt = 0
    for f in fs:
        try:
            f.result(5 * MULT)
        except A.ActorInDoubtError as exc:
            assert not isinstance(exc, A.ActorTimeoutError), exc
            assert exc.errname == "HV_EINDOUBT" and "may or may not have run" in str(exc), exc
            in_doubt += 1
    took = time.monotonic() - t0
    assert in_doubt >= 150, "only %d calls in doubt" % in_doubt
    assert took < 2 * MULT, "the calls in flight took %.1f s to fail" % took
    e = expect_raises(A.ActorNotDeliveredError, h.call, "get", contains="not sent")
    assert e.errname == "HV_EUNAVAIL"
    # libhv's own reason (hv_actor_last_error), naming the actor that went away.
    assert "the connection to the actor at %s was lost" % act.address in str(e), str(e)
    h.close()


def scenario_state(tmp, examples):
    state = os.path.join(tmp, "state")
    act = Actor(tmp, "pycounter", env={"HV_ACTOR_STATE_OUT": state})
    h = A.connect(act.address, SECRET)
    for k in (5, 6, 31):
        h.call("add", b"%d" % k)
    h.close()
    assert act.stop() == 0
    assert open(state, "rb").read() == b"42 3"
    act = Actor(tmp, "pycounter", env={"HV_ACTOR_STATE_IN": state})
    with A.connect(act.address, SECRET) as h:
        assert h.call("get") == b"42"
        assert h.call("add", b"1") == b"43"
    assert act.stop() == 0

    pstate = os.path.join(tmp, "pstate")
    act = Actor(tmp, "pyobj", env={"HV_ACTOR_STATE_OUT": pstate})
    p = A.connect(act.address, SECRET).with_pickle()
    p.push(("epoch", 1, 0.91))
    p.push(("epoch", 2, 0.93))
    p.handle.close()
    assert act.stop() == 0
    act = Actor(tmp, "pyobj", env={"HV_ACTOR_STATE_IN": pstate})
    with A.connect(act.address, SECRET) as h:
        assert h.with_pickle().all() == [("epoch", 1, 0.91), ("epoch", 2, 0.93)]
    assert act.stop() == 0

    # A state file for the wrong class fails the start with load's error, not a crash.
    act_log = os.path.join(tmp, "bad.log")
    e = dict(os.environ, HV_ACTOR_CLASS="pycounter", HV_ACTOR_SECRET=SECRET,
             HV_ACTOR_STATE_IN=pstate)
    with open(act_log, "wb") as lf:
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--serve"], env=e,
                             stderr=lf, timeout=10 * MULT)
    log = open(act_log).read()
    assert rc == 1 and "load of actor class pycounter failed" in log, (rc, log)

    # Server.save between calls, in this process.
    srv = A.start("pycounter", b"9", secret=SECRET)
    try:
        with A.connect("127.0.0.1:%d" % srv.port, SECRET) as h:
            h.call("add", b"1")
            srv.save(os.path.join(tmp, "mid"))
            h.call("add", b"1")
    finally:
        srv.stop()
    assert open(os.path.join(tmp, "mid"), "rb").read() == b"10 1"


SCENARIOS = {"calls": scenario_calls, "interop": scenario_interop, "killed": scenario_killed,
             "state": scenario_state}


def serve_main():
    declare()
    try:
        A.serve()
    except Exception as exc:  # noqa: BLE001 -- the test reads the message and the status
        sys.stderr.write("actor_test --serve: %s\n" % exc)
        return 1
    return 0


def main(argv):
    if "--serve" in argv:
        return serve_main()
    pypath = argv[argv.index("--pypath") + 1]
    examples = argv[argv.index("--examples") + 1] if "--examples" in argv else \
        os.environ.get("HV_EXAMPLES_DIR", "")
    scenario = argv[-1]
    if scenario not in SCENARIOS:
        print("usage: actor_test.py --pypath DIR [--examples DIR] %s" % "|".join(SCENARIOS))
        return 64
    if os.environ.get("HV_TEST_SANITIZE"):
        print("SKIP: sanitizer build: its libhv.so needs the ASan runtime preloaded into python")
        return 77
    if not os.environ.get("HV_IN_CHILD"):
        # Re-run in a child with the path and (sanitizer build) the preloaded runtimes, bounded.
        env = dict(os.environ, PYTHONPATH=os.path.abspath(pypath), HV_IN_CHILD="1",
                   HV_LOG_LEVEL=os.environ.get("HV_LOG_LEVEL", "4"))
        if os.environ.get("HV_TEST_PRELOAD"):
            env["LD_PRELOAD"] = os.environ["HV_TEST_PRELOAD"]
            env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
        # In a session of its own, so that a timeout ends its actor processes too.
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env,
                                 start_new_session=True)
        try:
            rc = child.wait(50 * MULT)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            print("FAIL: %s timed out" % scenario)
            return 1
        print("PASS" if rc == 0 else "FAIL: %s exited %d" % (scenario, rc))
        return 0 if rc == 0 else 1
    declare()
    with tempfile.TemporaryDirectory(prefix="hv-pyactor-") as tmp:
        t0 = time.monotonic()
        try:
            SCENARIOS[scenario](tmp, examples)
        finally:
            for p in LIVE:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        print("%s: %.1f s" % (scenario, time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
