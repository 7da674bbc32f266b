#!/usr/bin/python3
"""bench_exit.py: how long after a SIGKILL a process's sockets close, by what the process holds
(docs/PERFORMANCE.md, "Reset from Python"). A peer of a killed worker learns of the death from
its connections, which the kernel closes only after it has freed the process's memory; so the
size of a worker bounds how fast a reset can start.

    bench_exit.py [--kills N] [--pypath DIR] [VARIANT ...]

VARIANTs (default all): plain (python3, nothing imported), anon (python3 holding 230 MB of
written heap memory), torch (import torch), hvtorch (import hv.torch, with --pypath on the
path). Each: start the process, let it connect to a socket here, SIGKILL it, time until the
socket reads EOF; prints the times (ms, sorted), the median, and the process's RSS and mappings.
"""

import os
import signal
import socket
import statistics
import subprocess
import sys
import time

TAIL = ("import socket, time\n"
        "s = socket.create_connection(('127.0.0.1', %d)); s.send(b'x'); time.sleep(120)\n")
VARIANTS = {
    "plain": "",
    "anon": "b = bytearray(b'\\1') * (230 << 20)\n",
    "torch": "import torch\ntorch.set_num_threads(1)\n",
    "hvtorch": "import hv.torch\nimport torch\ntorch.set_num_threads(1)\n",
}


def one(code, env):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    ls.settimeout(120)
    p = subprocess.Popen([sys.executable, "-c", code + TAIL % ls.getsockname()[1]], env=env)
    try:
        c, _ = ls.accept()
        c.settimeout(30)
        c.recv(1)
        time.sleep(0.3)
        with open("/proc/%d/status" % p.pid) as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
        with open("/proc/%d/maps" % p.pid) as f:
            maps = sum(1 for _ in f)
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGKILL)
        c.recv(1)
        ms = (time.monotonic() - t0) * 1000
        c.close()
        return ms, rss, maps
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        ls.close()


def main(argv):
    kills, pypath, names = 7, None, []
    i = 1
    while i < len(argv):
        if argv[i] in ("--kills", "--pypath") and i + 1 < len(argv):
            if argv[i] == "--kills":
                kills = int(argv[i + 1])
            else:
                pypath = os.path.abspath(argv[i + 1])
            i += 2
        elif argv[i] in VARIANTS:
            names.append(argv[i])
            i += 1
        else:
            print(__doc__, file=sys.stderr)
            return 2
    env = dict(os.environ)
    if pypath:
        env["PYTHONPATH"] = pypath
    with open("/proc/loadavg") as f:
        print("load average %s" % " ".join(f.read().split()[:3]))
    for name in names or list(VARIANTS):
        runs = [one(VARIANTS[name], env) for _ in range(kills)]
        t = sorted(r[0] for r in runs)
        print("%-8s kill -> EOF ms: median %6.1f  [%s]  rss %d MB, %d mappings" %
              (name, statistics.median(t), " ".join("%.1f" % x for x in t),
               runs[0][1] // 1024, runs[0][2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
