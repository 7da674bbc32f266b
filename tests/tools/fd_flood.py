#!/usr/bin/python3
"""fd_flood: holds many connections or streams open on the head, as a careless or hostile client
would, and reports what the head did with them (Debian's python3-grpcio; shares no code with hv).

usage:
  fd_flood.py watch HOST:PORT TOKEN_FILE JOB N HOLD_S
      opens N Jobs/Watch streams (follow, events) on JOB with the token, waits HOLD_S seconds,
      prints "held H exhausted E other O" and each distinct refusal, then cancels them all.
  fd_flood.py idle HOST:PORT N WAIT_S
      opens N TCP connections that send nothing, waits up to WAIT_S seconds for the head to close
      them, prints "opened N closed C", then closes them all.
Every wait is bounded.
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pbwire import varint  # noqa: E402


def watch(target, token_file, job, n, hold):
    import grpc

    token = open(token_file).read().strip()
    # WatchRequest: job_id = 1, events = 3, follow = 4
    req = b"\x08" + varint(job) + b"\x18\x01\x20\x01"
    chan = grpc.insecure_channel(target)
    ident = lambda b: b  # noqa: E731 (raw bytes both ways)
    call = chan.unary_stream("/hvpb.v1.Jobs/Watch", ident, ident)
    streams, results = [], {}
    lock = threading.Lock()

    def drain(i, it):
        try:
            for _ in it:
                pass
            res = ("ended", "")
        except grpc.RpcError as e:
            res = (e.code().name, e.details() or "")
        with lock:
            results[i] = res

    threads = []
    for i in range(n):
        it = call(req, metadata=[("authorization", "Bearer " + token)], timeout=hold + 30)
        streams.append(it)
        t = threading.Thread(target=drain, args=(i, it), daemon=True)
        t.start()
        threads.append(t)
    time.sleep(hold)
    with lock:
        done = dict(results)
    held = n - len(done)
    exhausted = sum(1 for c, _ in done.values() if c == "RESOURCE_EXHAUSTED")
    print("held %d exhausted %d other %d" % (held, exhausted, len(done) - exhausted))
    for why in sorted(set("%s: %s" % r for r in done.values())):
        print("refused", why)
    sys.stdout.flush()
    for it in streams:
        it.cancel()
    for t in threads:
        t.join(5)
    chan.close()


def idle(target, n, wait):
    host, port = target.rsplit(":", 1)
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection((host, int(port)), timeout=2))
        except OSError as e:
            print("connect failed: %s" % e)
            break
    for s in socks:
        s.setblocking(False)
    closed = set()
    deadline = time.time() + wait
    while len(closed) < len(socks) and time.time() < deadline:
        for i, s in enumerate(socks):
            if i in closed:
                continue
            try:
                while s.recv(65536):  # the head's SETTINGS frame, if it got that far
                    pass
                closed.add(i)  # end of stream
            except BlockingIOError:
                pass
            except OSError:
                closed.add(i)  # reset
        time.sleep(0.1)
    print("opened %d closed %d" % (len(socks), len(closed)))
    sys.stdout.flush()
    for s in socks:
        s.close()


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "watch":
        watch(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
    elif len(sys.argv) == 5 and sys.argv[1] == "idle":
        idle(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
