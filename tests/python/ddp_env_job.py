"""ddp_env_job.py: a DistributedDataParallel script as torchrun users write it, for
tests/integration/python_ddp_env.sh, submitted as `hvsubmit -np 3 -- /usr/bin/python3
ddp_env_job.py`.

It reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) and passes them to
init_process_group as such scripts do (hv.torch.parallel's, torch.distributed's signature), wraps
a model in hv.torch.parallel.DistributedDataParallel and takes one step. Every rank prints

  env RANK=r WORLD_SIZE=w LOCAL_RANK=l LOCAL_WORLD_SIZE=lw MASTER_ADDR=x hv=r/w/l/lw node=N
  grad G

where hv= is hv.torch's rank/size/local_rank/local_size and G the averaged gradient of the
model's weight (the same on every rank: rank r's sample is r + 1).
"""

import os

import hv
import hv.torch as hvd
from hv.torch import parallel
import torch

parallel.init_process_group("gloo", rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))
print("env RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s "
      "hv=%d/%d/%d/%d node=%s" %
      (os.environ.get("RANK"), os.environ.get("WORLD_SIZE"), os.environ.get("LOCAL_RANK"),
       os.environ.get("LOCAL_WORLD_SIZE"), os.environ.get("MASTER_ADDR", "unset"), hvd.rank(),
       hvd.size(), hvd.local_rank(), hvd.local_size(), hv.host_name()), flush=True)
model = torch.nn.Linear(1, 1, bias=False)
ddp = parallel.DistributedDataParallel(model)
x = torch.full((1, 1), float(parallel.get_rank() + 1))
ddp(x).sum().backward()
print("grad %g" % model.weight.grad.item(), flush=True)
hvd.shutdown()
