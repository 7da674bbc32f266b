#!/usr/bin/python3
"""http_flood: a client that tries to keep the head's HTTP listener (/metrics, the status page)
busy with requests that never end (Python standard library only; shares no code with hv).

usage:
  http_flood.py HOST:PORT SRC_ADDRS N SECONDS
      keeps up to N connections open at once from the source addresses SRC_ADDRS (comma
      separated; any 127.x.y.z works on Linux; connections go to them in turn), each sending the
      first half of a request head ("GET /metrics HTTP/1.1\\r\\nHost: x\\r\\n") and nothing more.
      A connection the head closes or answers (408) is opened again, at most one new connection
      every 2 ms and at most 20000 in all, for SECONDS seconds. Then prints "opened O refused R
      answered A held H" (refused: closed before any byte came back; answered: a response came
      first; held: still open at the end) and closes everything. Every wait is bounded.
"""
import select
import socket
import sys
import time

HALF = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
MAX_OPENS = 20000


def main():
    target, srcs, n, secs = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
    host, port = target.rsplit(":", 1)
    port = int(port)
    open_socks = {}
    opened = refused = answered = 0
    end = time.monotonic() + secs
    next_open = 0.0
    turn = 0
    while time.monotonic() < end:
        now = time.monotonic()
        if len(open_socks) < n and opened < MAX_OPENS and now >= next_open:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(True)
            s.settimeout(1)
            try:
                s.bind((srcs[turn % len(srcs)], 0))
                turn += 1
                s.connect((host, port))
                s.sendall(HALF)
                s.setblocking(False)
                open_socks[s.fileno()] = s
            except OSError:
                refused += 1
                s.close()
            opened += 1
            next_open = now + 0.002
        wait = max(0.0, min(next_open - time.monotonic(), end - time.monotonic(), 0.05))
        r, _, _ = select.select(list(open_socks.values()), [], [], wait) if open_socks else (
            [], [], [time.sleep(wait)])
        for s in r:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                answered += 1
            else:
                refused += 1
            del open_socks[s.fileno()]
            s.close()
    print("opened %d refused %d answered %d held %d" % (opened, refused, answered,
                                                         len(open_socks)), flush=True)
    for s in open_socks.values():
        s.close()


if __name__ == "__main__":
    main()
