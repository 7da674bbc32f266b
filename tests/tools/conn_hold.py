#!/usr/bin/python3
"""conn_hold: holds TCP connections to the head from one source address, as a client that opens
too many would, and reports which ones the head closed at once (Python standard library only;
shares no code with hv).

usage:
  conn_hold.py HOST:PORT SRC_ADDR N HOLD_S [CA_FILE]
      opens N connections from SRC_ADDR (any 127.x.y.z works on Linux) one after the other, each
      sending the HTTP/2 client preface and an empty SETTINGS frame (so the head's handshake
      timeout does not close it), waits up to 1.5 s for the head's answer on each, prints
      "open O closed C" (closed: the head ended it, EOF or reset, before sending anything) and
      flushes, then holds the open ones for HOLD_S seconds (or until SIGTERM) and closes
      them. With CA_FILE, each connection first makes a TLS handshake (ALPN h2) verified
      against it; a connection the head closes during the handshake counts as closed. Every
      wait is bounded.
"""
import select
import signal
import socket
import ssl
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"


def verdict(s, deadline):
    """'open' once the head sends something, 'closed' on EOF or reset, 'open' at the deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "open"
        r, _, _ = select.select([s], [], [], left)
        if not r:
            return "open"
        try:
            data = s.recv(4096)
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return "closed"
        if not data:
            return "closed"
        try:
            s.sendall(SETTINGS_ACK)  # the head's SETTINGS, acknowledged as a client would
        except OSError:
            return "closed"
        return "open"


def main():
    target, src, n, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    host, port = target.rsplit(":", 1)
    tls = None
    if len(sys.argv) > 5:
        tls = ssl.create_default_context(cafile=sys.argv[5])
        tls.set_alpn_protocols(["h2"])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    held, closed = [], 0
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((src, 0))
        s.settimeout(5)
        s.connect((host, int(port)))
        try:
            if tls is not None:
                s = tls.wrap_socket(s, server_hostname=host)
            s.sendall(PREFACE)
        except OSError:
            closed += 1
            s.close()
            continue
        if verdict(s, time.monotonic() + 1.5) == "closed":
            closed += 1
            s.close()
        else:
            held.append(s)
    print("open %d closed %d" % (len(held), closed), flush=True)
    time.sleep(hold)
    for s in held:
        s.close()


if __name__ == "__main__":
    main()
