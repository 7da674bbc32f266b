"""hv.torch.elastic: elastic training from Python over libhv's elastic C API (<hv/elastic.h>),
with Horovod's names (horovod.torch.elastic):

  TorchState, ObjectState, State   the state that is committed, restored after a failure and
                                   synced to every worker of a new round (state.py)
  run                              Horovod's hvd.elastic.run: the training function under
                                   libhv's retry loop (state.py)
  ElasticSampler                   Horovod's sampler for a DataLoader (record_batch, set_epoch,
                                   state_dict), exact: every sample once per epoch across resets
                                   (sampler.py)
  StepSampler                      hv's step sampler (libhv's hv_sampler_*: batches(), a constant
                                   global batch, growth schedules); ElasticSampler(...,
                                   batch_size=N) makes one, as hv's earlier ElasticSampler did
                                   (steps.py)
  generation()                     the job's round number (libhv's hv_generation)

Tested without a head (worker_lib/python/tests/torch_test.py elastic, sampler) and under
hvsubmit/hvagent (tests/integration/python_elastic_*.sh with examples/python/train_fmnist.py,
python_horovod_elastic.sh with tests/python/horovod/pytorch_mnist_elastic.py). See
docs/python.md, "Elastic".
"""

from ...errors import HostsUpdatedInterrupt, HvInternalError as HorovodInternalError  # noqa: F401
from .sampler import ElasticSampler
from .state import ObjectState, State, TorchState, generation, run
from .steps import StepSampler

__all__ = ["State", "ObjectState", "TorchState", "run", "ElasticSampler", "StepSampler",
           "generation"]
