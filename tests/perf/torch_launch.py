"""Shared by the 2-rank PyTorch benchmarks (bench_torch.py, bench_torch_bert.py): starts n copies
of a script on this machine, each with hv's file rendezvous (HV_RDZV_DIR, HV_RANK, HV_SIZE...)
and torch.distributed's (MASTER_ADDR, MASTER_PORT) set, one torch thread each, and returns the
first non-zero exit status (0 when all succeeded)."""
import os
import socket
import subprocess
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n, pypath, script, argv, prefix="hv-bench-"):
    with tempfile.TemporaryDirectory(prefix=prefix) as rdzv:
        port = str(free_port())
        procs = []
        for r in range(n):
            env = dict(os.environ, PYTHONPATH=pypath, HV_RDZV_DIR=rdzv, HV_RANK=str(r),
                       HV_SIZE=str(n), HV_LOCAL_RANK=str(r), HV_LOCAL_SIZE=str(n),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([sys.executable, os.path.abspath(script)] + argv,
                                          env=env))
        rc = 0
        for p in procs:
            rc = rc or p.wait()
        return rc
