"""exit_job.py: how a Python worker's end ends its part of the job, for
tests/integration/python_exit.sh: `hvsubmit -np 2 -- /usr/bin/python3 exit_job.py MODE`. Every
rank joins, runs an allreduce and prints "rank R sum S", then, without hvd.shutdown():
  return     returns from the script (as Horovod's examples end): the job succeeds
  raise      rank 1 raises an exception, rank 0 returns: the job fails (rank 1's status 1)
  exit3      sys.exit(3) on every rank: hvsubmit exits 3
  os_exit    os._exit(0) on every rank (no exit handlers run): the job fails, saying that the
             rank did not call hv_shutdown
"""

import os
import sys

import hv.torch as hvd
import torch

mode = sys.argv[1]
hvd.init()
r = hvd.rank()
total = hvd.allreduce(torch.full((4,), float(r + 1)), op=hvd.Sum)
print("rank %d sum %g" % (r, total[0].item()), flush=True)
if mode == "raise" and r == 1:
    raise RuntimeError("rank 1 fails on purpose")
if mode == "exit3":
    sys.exit(3)
if mode == "os_exit":
    os._exit(0)
