"""hv.torch.elastic.steps: StepSampler, hv's own step-by-step sampler on libhv's exact sampler
(hv_sampler_*, <hv/elastic.h>): within an epoch every sample is handed out once across all
ranks, across any number of resets (what was handed out is exchanged at every commit; a restore
hands out again only what was not committed). It batches by itself (batches() yields a list of
this rank's indices per step), can keep a constant global batch across world sizes, and drives
growth schedules (hvsubmit --grow) at next_epoch(). examples/python/train_fmnist.py and
tests/python/elastic_scenario.py use it.

Horovod's ElasticSampler (DataLoader, record_batch) is hv.torch.elastic.ElasticSampler
(sampler.py); ElasticSampler(..., batch_size=N) still returns a StepSampler, so scripts written
for hv's earlier ElasticSampler keep working. See docs/python.md, "Elastic".
"""

import ctypes

import torch

from ... import _lib
from . import _c


class StepSampler(torch.utils.data.Sampler):
    """libhv's exact sampler. batch_size: samples per step per rank, or the global batch split
    across ranks when global_batch=True (the same optimisation at any world size). Pass it to
    TorchState as a keyword argument (TorchState(model, opt, sampler=s)), which makes its
    position part of the committed state. Iterate a step at a time with batches() (a list per
    step, possibly empty on some ranks in an epoch's last step: every rank still takes part in
    the step's collectives and commit). Iterating the sampler itself yields the same indices one
    by one (for a DataLoader with num_workers=0; prefetching workers would take indices of steps
    not yet processed, which the next commit then counts as done)."""

    def __init__(self, dataset, shuffle=True, seed=0, batch_size=32, global_batch=False):
        n = len(dataset)
        if n < 1 or batch_size < 1:
            raise ValueError("hv.torch.elastic.StepSampler: needs a non-empty dataset and "
                             "batch_size >= 1")
        self._cfg = _c.SamplerConfig(ctypes.sizeof(_c.SamplerConfig), n, int(seed),
                                     int(batch_size), 1 if global_batch else 0,
                                     1 if shuffle else 0)
        self._s = None
        self.num_samples = n
        self.batch_size = int(batch_size)

    def _attach(self, state, name):
        if self._s is not None:
            raise ValueError("hv.torch.elastic.StepSampler: already part of a TorchState")
        s = ctypes.c_void_p()
        _lib.check(_c.l.hv_sampler_create(state._handle(), name.encode(), ctypes.byref(self._cfg),
                                          ctypes.byref(s)), "hv_sampler_create")
        self._s = s  # owned by the state (freed with it)

    def _handle(self):
        if self._s is None:
            raise ValueError("hv.torch.elastic.StepSampler: pass it to TorchState(..., "
                             "name=sampler) before use")
        return self._s

    def next_batch(self):
        """This rank's indices for the next step (a list, maybe empty), or None at the end of
        the epoch (on every rank at the same step)."""
        cap = self.batch_size + 1
        buf = (ctypes.c_uint64 * cap)()
        n = ctypes.c_size_t(0)
        end = ctypes.c_int(0)
        _lib.check(_c.l.hv_sampler_next(self._handle(), buf, cap, ctypes.byref(n),
                                        ctypes.byref(end)), "hv.torch.elastic.StepSampler")
        if end.value:
            return None
        return list(buf[:n.value])

    def batches(self):
        """Steps of this epoch from the current position: a list of indices per step."""
        while True:
            b = self.next_batch()
            if b is None:
                return
            yield b

    def __iter__(self):
        for b in self.batches():
            yield from b

    def __len__(self):
        return self.num_samples

    @property
    def step_samples(self):
        """Samples of the last step over all ranks (the divisor for a batch mean)."""
        return int(_c.l.hv_sampler_step_samples(self._handle()))

    def next_epoch(self):
        """Starts the next epoch (every rank)."""
        _lib.check(_c.l.hv_sampler_next_epoch(self._handle()), "hv.torch.elastic.next_epoch")

    def set_epoch(self, epoch):
        """Horovod's form: moves on to epoch (from the sampler's own epoch; never back)."""
        while self.stats()["epoch"] < epoch:
            self.next_epoch()

    def stats(self):
        """{epoch, processed, duplicates, remaining, checksum} of the current epoch."""
        st = _c.SamplerStats()
        st.size = ctypes.sizeof(_c.SamplerStats)
        _lib.check(_c.l.hv_sampler_stats(self._handle(), ctypes.byref(st)),
                   "hv.torch.elastic.stats")
        return {k: int(getattr(st, k)) for k, _ in _c.SamplerStats._fields_[1:]}

    def _horovod_only(self, what):
        raise TypeError(
            "hv.torch.elastic.StepSampler.%s: this sampler (made with batch_size=, hv's step "
            "sampler) records what each step handed out by itself at every commit; %s is "
            "Horovod's ElasticSampler's: make it as hvd.elastic.ElasticSampler(dataset, "
            "shuffle=..., seed=...) without batch_size and give it to a DataLoader "
            "(docs/python.md, Elastic)" % (what, what))

    def record_batch(self, batch_idx, batch_size):
        self._horovod_only("record_batch")

    def record_indices(self, indices):
        self._horovod_only("record_indices")

    def get_indices(self, batch_idx, batch_size):
        self._horovod_only("get_indices")

    def state_dict(self):
        self._horovod_only("state_dict")

    def load_state_dict(self, state_dict):
        self._horovod_only("load_state_dict")
