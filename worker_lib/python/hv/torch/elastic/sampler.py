"""hv.torch.elastic.sampler: ElasticSampler, Horovod's elastic sampler for a DataLoader, with
hv's exactly-once guarantee.

    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=B, sampler=sampler)
    state = hvd.elastic.TorchState(model=model, optimizer=opt, sampler=sampler, epoch=0, batch=0)
    ...
    for state.batch, (x, y) in enumerate(loader, start=state.batch):
        ...  # one step
        state.sampler.record_batch(state.batch, B)
        if state.batch % commit_every == 0:
            state.commit()
    state.sampler.set_epoch(epoch + 1)

What it keeps, per epoch: which samples are processed, as one byte per sample registered with
the TorchState (libhv state buffers), so commit snapshots it, a restore after a failure puts it
back and the sync of a new round gives every worker rank 0's. At every commit the indices each
rank recorded since the last commit (record_batch, record_indices) are exchanged (one allgather)
and marked, before the state is snapshot: whatever fails, the committed position holds every
sample trained on in the committed model, and nothing else. Each pass over the sampler (a new
`for ... in loader`, as after every reset) hands out the samples of the epoch that are not
processed yet, in the epoch's seeded order, split among the ranks of the current world (rank r
takes every n-th). So within an epoch every sample is trained on exactly once, with ranks lost,
added or drained in between.

Every rank must get the same number of batches from a pass, or the ranks' collectives would
not pair up. With R samples left on n ranks and batches of B, the split above does that unless
R // n is a multiple of B and R % n > 0 (then some ranks would get one batch more); there, and
while the sampler does not know B yet (it learns it from the first record_batch of the job, and
keeps it in the state), the ranks that would be short get a duplicate of an earlier sample of
the pass, as Horovod pads every pass. Such a sample counts in stats()["duplicates"]. A DataLoader
with drop_last=True drops samples and can give ranks different batch counts: leave it False.

Called by training scripts and by hv.torch.elastic.state (attach at TorchState construction,
_exchange at commit, _rewind at the start of every round).
"""

import ctypes

import torch

from ... import _lib
from ...errors import MismatchError
from . import _c

# _pos fields (an int64 tensor registered with the state)
_EPOCH, _BATCH, _PROCESSED, _DUPLICATES, _CHECKSUM = range(5)


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=0): partitions the
    samples of each epoch not yet processed among the current ranks, for a DataLoader; record
    processed batches with record_batch (or record_indices) and give the sampler to the
    TorchState. len() is this rank's share of what remains in the epoch.

    hv's step sampler (libhv's, which batches by itself: StepSampler) is made instead when
    batch_size or global_batch is given, as hv's earlier ElasticSampler was."""

    def __new__(cls, dataset=None, shuffle=True, seed=0, batch_size=None, global_batch=False):
        if cls is ElasticSampler and (batch_size is not None or global_batch):
            from .steps import StepSampler
            return StepSampler(dataset, shuffle=shuffle, seed=seed,
                               batch_size=32 if batch_size is None else batch_size,
                               global_batch=global_batch)
        return super().__new__(cls)

    def __init__(self, dataset, shuffle=True, seed=0, batch_size=None, global_batch=False):
        del batch_size, global_batch  # (StepSampler's; see __new__)
        n = len(dataset)
        if n < 1:
            raise ValueError("hv.torch.elastic.ElasticSampler: the dataset is empty")
        self.dataset = dataset
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self._n = n
        # The committed position (registered with the state when the sampler joins one).
        self._done = torch.zeros(n, dtype=torch.uint8)  # 1: processed in this epoch
        self._pos = torch.zeros(5, dtype=torch.int64)  # epoch, batch size, counters
        self._attached = False
        self._pending = []  # indices this rank recorded since the last commit
        self.indices = []  # this rank's indices in the current pass (Horovod's attribute)
        self._cursor = 0  # of self.indices: what record_batch records next

    # ---- Horovod's interface ------------------------------------------------------------------

    @property
    def epoch(self):
        return int(self._pos[_EPOCH])

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: nothing of it processed, a new order when shuffle. Call it at
        the end of an epoch with the next one's number (then commit), as Horovod asks; setting
        the epoch the sampler is already in keeps what was processed, so a script that calls
        set_epoch(state.epoch) when it (re-)enters an epoch after a reset stays exact."""
        epoch = int(epoch)
        if epoch == self.epoch:
            return
        self._pos.zero_()
        self._pos[_EPOCH] = epoch
        self._pos[_BATCH] = self._batch_size
        self._done.zero_()
        self._rewind()

    def record_batch(self, batch_idx, batch_size):
        """Records the next batch of this rank's pass (batch_size samples, fewer at its end)
        as processed; it becomes part of the state at the next commit. batch_idx is accepted
        for Horovod's signature: the batches are taken in the order the pass handed them out,
        however the script numbers them (enumerate(loader, start=state.batch) after a reset)."""
        batch_size = int(batch_size)
        if batch_size < 1:
            raise ValueError("hv.torch.elastic.ElasticSampler.record_batch: batch_size must be "
                             "at least 1, got %d" % batch_size)
        if self._batch_size == 0:
            self._pos[_BATCH] = batch_size
        take = self.indices[self._cursor:self._cursor + batch_size]
        self._cursor += len(take)
        self._pending.extend(take)

    def record_indices(self, indices):
        """Records these sample indices as processed (at the next commit)."""
        idx = [int(i) for i in indices]
        bad = [i for i in idx if not 0 <= i < self._n]
        if bad:
            raise ValueError("hv.torch.elastic.ElasticSampler.record_indices: indices %s are "
                             "outside the dataset (0..%d)" % (bad[:5], self._n - 1))
        self._pending.extend(idx)

    def get_indices(self, batch_idx, batch_size):
        """This rank's indices of batch batch_idx (counted from the start of the current pass)
        of batch_size samples."""
        start = int(batch_idx) * int(batch_size)
        return self.indices[start:start + int(batch_size)]

    def state_dict(self):
        """{"epoch", "processed_indices" (committed and recorded here since), "processed_num"}."""
        done = set(torch.nonzero(self._done).flatten().tolist()) | set(self._pending)
        return {"epoch": self.epoch, "processed_indices": done, "processed_num": len(done)}

    def load_state_dict(self, state_dict):
        """Sets the epoch and what of it is processed: "processed_indices" (hv's and Horovod
        0.20's), else "processed_num" (Horovod >= 0.23's: the first processed_num samples of
        the epoch's order). Local: load the same on every rank."""
        self._pos.zero_()
        self._pos[_EPOCH] = int(state_dict["epoch"])
        self._pos[_BATCH] = self._batch_size
        self._done.zero_()
        if "processed_indices" in state_dict:
            idx = torch.tensor(sorted(int(i) for i in state_dict["processed_indices"]),
                               dtype=torch.int64)
        else:
            idx = self._order()[:int(state_dict.get("processed_num", 0))]
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self._n):
            raise ValueError("hv.torch.elastic.ElasticSampler.load_state_dict: indices outside "
                             "the dataset (0..%d)" % (self._n - 1))
        self._done[idx] = 1
        self._pos[_PROCESSED] = int(self._done.sum())
        self._pos[_CHECKSUM] = int(idx.sum()) if idx.numel() else 0
        self._rewind()

    def reset(self):
        """Re-partitions for the current world (each pass does it by itself)."""
        self._rewind()

    def __iter__(self):
        """A pass: this rank's share of the samples of the epoch not processed yet (at the last
        commit). What was recorded and not committed before the pass starts is handed out
        again: commit before starting a new pass in the same epoch (a reset always does)."""
        self._pending = []
        self.indices = self._partition()
        self._cursor = 0
        return iter(self.indices)

    def __len__(self):
        return len(self._partition())

    @property
    def num_replicas(self):
        return _world()[1]

    @property
    def rank(self):
        return _world()[0]

    @property
    def num_samples(self):
        return len(self)

    @property
    def total_size(self):
        return len(self) * self.num_replicas

    @property
    def remaining_indices(self):
        return self._remaining().tolist()

    @property
    def processed_indices(self):
        return self.state_dict()["processed_indices"]

    @property
    def processed_num(self):
        return self.state_dict()["processed_num"]

    # ---- hv's additions -----------------------------------------------------------------------

    def stats(self):
        """{epoch, processed, duplicates, remaining, checksum} of the current epoch, as of the
        last commit (hv's step sampler's stats: the epoch is exact when processed equals the
        dataset's length, duplicates is 0 and checksum is n(n-1)/2)."""
        p = self._pos.tolist()
        return {"epoch": p[_EPOCH], "processed": p[_PROCESSED], "duplicates": p[_DUPLICATES],
                "remaining": self._n - p[_PROCESSED], "checksum": p[_CHECKSUM]}

    # ---- the partition ------------------------------------------------------------------------

    @property
    def _batch_size(self):
        return int(self._pos[_BATCH])

    def _order(self):
        if not self.shuffle:
            return torch.arange(self._n)
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(self._n, generator=g)

    def _remaining(self):
        order = self._order()
        return order[self._done[order] == 0]

    def _partition(self):
        """This rank's indices for a pass (a list)."""
        rank, n = _world()
        rest = self._remaining()
        r = rest.numel()
        base, extra = divmod(r, n)
        b = self._batch_size
        if extra and (b == 0 or base % b == 0):
            # Some ranks would get a batch more than others: the short ones get a duplicate.
            need = (base + 1) * n - r
            rest = torch.cat([rest, rest.repeat(need // r + 1)[:need]])
        return rest[rank::n].tolist()

    # ---- with the state (hv.torch.elastic.state) ------------------------------------------

    def _attach(self, state, name):
        if self._attached:
            raise ValueError("hv.torch.elastic.ElasticSampler: already part of a TorchState")
        state._add_buffer("sampler.%s.processed" % name, self._done)
        state._add_buffer("sampler.%s.position" % name, self._pos)
        self._attached = True

    def _rewind(self):
        """A new round (or epoch): what was recorded and not committed is dropped (a restore
        sends it back to be processed again); the next pass re-partitions."""
        self._pending = []
        self.indices = []
        self._cursor = 0

    def _exchange(self):
        """Commit, before the snapshot (every rank, collective): every rank's recorded indices
        are marked processed. One allgather."""
        mine = torch.tensor(self._pending, dtype=torch.int64)
        got = _allgather_i64(mine)
        self._pending = []
        if got.numel() == 0:
            return
        if int(got.min()) < 0 or int(got.max()) >= self._n:
            raise MismatchError("hv.torch.elastic.ElasticSampler: a rank recorded sample %d of "
                                "a dataset of %d: the ranks disagree about the dataset" %
                                (int(got.max()), self._n), 6, "HV_EPROTO")
        uniq, counts = torch.unique(got, return_counts=True)
        new = uniq[self._done[uniq] == 0]
        self._done[new] = 1
        self._pos[_PROCESSED] += new.numel()
        self._pos[_DUPLICATES] += int(counts.sum()) - new.numel()
        self._pos[_CHECKSUM] += int(got.sum())


def _world():
    """(rank, size), (0, 1) before init."""
    size = _lib.hv_size()
    return (max(_lib.hv_rank(), 0), size) if size > 0 else (0, 1)


def _allgather_i64(t):
    """Every rank's int64 tensor t concatenated in rank order (sizes may differ). Blocking."""
    n = max(_lib.hv_size(), 1)
    counts = (ctypes.c_size_t * n)()
    cap = t.numel() * n + 1
    for _ in range(2):
        out = torch.empty(cap, dtype=torch.int64)
        rc = _lib.hv_allgather(t.data_ptr(), t.numel(), _lib.INT64, out.data_ptr(), cap, counts)
        if rc != 15:  # HV_ETOOBIG: a rank recorded more than this one guessed; retry at size
            break
        cap = sum(counts[i] for i in range(n))
    _lib.check(rc, "hv.torch.elastic.ElasticSampler (commit)")
    return out[:sum(counts[i] for i in range(n))]
