#!/usr/bin/python3
"""notify_listen.py SOCKET LOG [CMD...]: stands in for systemd's side of sd_notify in tests.

Binds an AF_UNIX datagram socket at SOCKET (a path, or "@name" for an abstract socket), and for
every datagram appends one line to LOG: "msg <the datagram, newlines as |>". When a datagram holds
READY=1 and CMD is given, it runs CMD at once (bounded: 10 s) and appends
"ready-check rc=<exit status> out=<first line of its output>", so a test can tell what a client saw
at the moment the daemon said it was ready. Runs until killed (or 120 s pass).
"""
import os
import socket
import subprocess
import sys
import time

path, log = sys.argv[1], sys.argv[2]
cmd = sys.argv[3:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + path[1:] if path.startswith("@") else path)
s.settimeout(1.0)
with open(log + ".tmp", "w") as f:
    f.write("listening\n")
os.rename(log + ".tmp", log)
end = time.monotonic() + 120
while time.monotonic() < end:
    try:
        data = s.recv(4096).decode("utf-8", "replace")
    except socket.timeout:
        continue
    with open(log, "a") as f:
        f.write("msg " + data.replace("\n", "|") + "\n")
    if "READY=1" in data.split("\n") and cmd:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            rc, out = p.returncode, (p.stdout + p.stderr)
        except subprocess.TimeoutExpired:
            rc, out = "timeout", ""
        with open(log, "a") as f:
            f.write("ready-check rc=%s out=%s\n" % (rc, out.replace("\n", "|")))
