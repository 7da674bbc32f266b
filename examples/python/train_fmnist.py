"""train_fmnist.py: a small CNN learns Fashion-MNIST with PyTorch, elastic on hv.

The model: two 3x3 convolutions (16 and 32 channels, each with ReLU and a 2x2 max-pool) and two
dense layers (1568-128-10), trained with SGD + momentum 0.9 on Debian's Fashion-MNIST
(dataset-fashion-mnist: /usr/share/datasets/fashion-mnist), read by its own loader of the IDX
files (no download, no torchvision). With 2 workers it reached 0.9008 test accuracy after its
second epoch and 0.9136 after the 4 it runs by default (docs/python.md, "The example").

What it shows of hv.torch (Horovod's API: `import hv.torch as hvd`):
- DistributedOptimizer(op=hvd.Sum): each gradient's allreduce starts while backward runs; the
  summed gradients are divided by the step's sample count over all ranks (the batch mean);
- hvd.elastic.TorchState: the model, the optimizer's momentum buffers, the sampler's position and
  the scalars (epoch, step, the epoch's loss sum) are committed after every step, restored after
  a failure and synced to workers that join;
- hvd.elastic.ElasticSampler: libhv's exact sampler. Every training sample is used exactly once
  per epoch across all ranks, whatever fails, joins or is drained in between;
- @hvd.elastic.run: the training function runs again after every membership change;
- a reset callback rescales the learning rate to the new world size (the linear scaling rule:
  the batch is per rank, so the global batch grows and shrinks with the workers);
- a worker removed by a drain leaves with exit status 0.

Output (stdout, rank 0, one line per epoch, then one at the end):
  train_fmnist: epoch=E size=W generation=G rank0=NODE samples=S duplicates=D exact=X
                loss=L accuracy=A seconds=T            (one line)
  train_fmnist: done epochs=E accuracy=A resets=R
S and D are the sampler's processed and duplicate counts at the epoch's end, X is 1 when the
epoch was exact (every sample once), L the mean training loss, A the test accuracy, T the
epoch's wall time on rank 0. The same format as examples/elastic_train.c.

Run it:
  python3 train_fmnist.py                                 one process
  hvsubmit -np 2 -- python3 train_fmnist.py --epochs 3    on a cluster (--min-np/--max-np:
                                                          elastic; --grow: a growth schedule)
"""

import argparse
import gzip
import os
import signal
import struct
import sys
import time

import hv.torch as hvd  # before torch: a node without torch fails with one clear line
import hv

import torch
import torch.nn.functional as F

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # of the Fashion-MNIST training images, in [0, 1]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="train_fmnist.py",
        description="A small CNN on Fashion-MNIST, elastic on hv (hv.torch).")
    p.add_argument("--epochs", type=int, default=4, help="epochs to train (default 4)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples per rank and step (default 32); the global batch is this "
                   "times the world size")
    p.add_argument("--lr", type=float, default=0.025,
                   help="learning rate per rank (default 0.025): the rate used is this times "
                   "the world size, rescaled at every membership change, and decayed by a "
                   "cosine over the run")
    p.add_argument("--seed", type=int, default=1, help="weights and shuffling (default 1)")
    p.add_argument("--data", default=os.environ.get("HV_FMNIST_DIR") or DEFAULT_DATA,
                   help="the IDX files' directory (default $HV_FMNIST_DIR, else %s)" %
                   DEFAULT_DATA)
    p.add_argument("--train-limit", type=int, default=0,
                   help="train on the first N training samples only (default: all 60000)")
    p.add_argument("--test-limit", type=int, default=0,
                   help="evaluate on the first N test samples only (default: all 10000)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per worker (default: the node's cores over the "
                   "workers on it)")
    p.add_argument("--step-delay-ms", type=int, default=0,
                   help="sleep N ms after every step (lets tests act in the middle of an epoch)")
    p.add_argument("--kill-at", metavar="E:B:R",
                   help="in the job's first generation, the worker of rank R kills itself "
                   "with SIGKILL at step B of epoch E (both from 0)")
    a = p.parse_args(argv)
    for name in ("epochs", "batch_size"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.lr <= 0:
        p.error("--lr must be positive")
    if a.kill_at:
        try:
            a.kill_at = tuple(int(x) for x in a.kill_at.split(":"))
            if len(a.kill_at) != 3 or min(a.kill_at) < 0:
                raise ValueError
        except ValueError:
            p.error("--kill-at: expected E:B:R (three whole numbers), got %r" % a.kill_at)
    return a


# ---- the data set --------------------------------------------------------------------------

def read_idx(path, magic, limit):
    """An IDX file (big-endian header: magic, then one 32-bit size per dimension; unsigned
    bytes after it) as a uint8 tensor of its shape, at most limit items (0: all)."""
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    if len(data) < 8 or struct.unpack(">I", data[:4])[0] != magic:
        raise ValueError("%s: not an IDX file of unsigned bytes (magic 0x%08x expected)" %
                         (path, magic))
    ndim = magic & 0xff
    dims = list(struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim]))
    n = dims[0] if limit <= 0 else min(dims[0], limit)
    item = 1
    for d in dims[1:]:
        item *= d
    body = data[4 + 4 * ndim:4 + 4 * ndim + n * item]
    if len(body) != n * item:
        raise ValueError("%s: truncated (%d of %d bytes)" % (path, len(body), n * item))
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).view([n] + dims[1:])


def load_split(data_dir, split, limit):
    """(images as float [N, 1, 28, 28] normalised, labels as int64 [N])."""
    images, labels = None, None
    for ext in (".gz", ""):
        ip = os.path.join(data_dir, "%s-images-idx3-ubyte%s" % (split, ext))
        lp = os.path.join(data_dir, "%s-labels-idx1-ubyte%s" % (split, ext))
        if os.path.exists(ip) and os.path.exists(lp):
            images, labels = read_idx(ip, 0x803, limit), read_idx(lp, 0x801, limit)
            break
    if images is None:
        raise FileNotFoundError("no %s-images-idx3-ubyte[.gz] in %s (install "
                                "dataset-fashion-mnist, or pass --data DIR)" % (split, data_dir))
    x = (images.float().div_(255.0).sub_(MEAN).div_(STD)).unsqueeze(1).contiguous()
    return x, labels.long()


# ---- the model -----------------------------------------------------------------------------

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = torch.nn.Linear(32 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


# ---- training ------------------------------------------------------------------------------

class Trainer:
    """What one worker keeps outside the committed state: the data, the options, and the last
    epoch's report (every rank computes the same one), plus which epochs rank 0 has printed.
    (tests/python/elastic_scenario.py builds its test program on this class.)"""

    PREFIX = "train_fmnist: "  # starts every epoch line

    def __init__(self, args, train, test, model, opt, state):
        self.a, self.train, self.test = args, train, test
        self.model, self.opt, self.state = model, opt, state
        self.entered = False  # train() ran before in this process
        self.printed = 0  # epochs whose line rank 0 printed (rank 0's word, see confirm())
        self.report = None
        self.timed_epoch, self.t_start = -1, 0.0
        self.peak_lr = args.lr * hvd.size()  # the linear scaling rule; on_reset rescales it

    def lr_now(self):
        """Cosine decay over the committed progress (the same on every rank, across resets)."""
        n = len(self.train[1])
        done = self.state.epoch + self.state.sampler.stats()["processed"] / n
        return self.peak_lr * 0.5 * (1.0 + torch.cos(torch.tensor(
            torch.pi * done / self.a.epochs)).item())

    def on_reset(self):
        """Called on every rank after each membership change, once the state is synced: the
        global batch is the per-rank batch times the new size, so is the learning rate."""
        old, self.peak_lr = self.peak_lr, self.a.lr * hvd.size()
        if hvd.rank() == 0:
            sys.stderr.write("train_fmnist: reset: %d workers (generation %d); peak learning "
                             "rate %.4g -> %.4g\n" % (hvd.size(), hvd.elastic.generation(), old,
                                                       self.peak_lr))

    def maybe_kill(self):
        k = self.a.kill_at
        s = self.state
        if k and (s.epoch, s.batch, hvd.rank()) == k and hvd.elastic.generation() == s.first_gen:
            sys.stderr.write("train_fmnist: rank %d: killing myself (SIGKILL) at epoch %d step "
                             "%d (--kill-at)\n" % (hvd.rank(), s.epoch, s.batch))
            sys.stderr.flush()
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def step(self, idx):
        """One step on this rank's samples idx (maybe none): the loss summed over the samples,
        the gradients summed over all ranks, divided by the step's global sample count."""
        x, y = self.train
        self.opt.zero_grad()
        loss = torch.zeros(1, dtype=torch.float64)
        if idx:
            i = torch.tensor(idx)
            out = self.model(x[i])
            lsum = F.cross_entropy(out, y[i], reduction="sum")
            loss += lsum.item()
            h = hvd.allreduce_async_(loss, name="loss", op=hvd.Sum)
            lsum.backward()  # each gradient's allreduce starts here (DistributedOptimizer)
        else:
            h = hvd.allreduce_async_(loss, name="loss", op=hvd.Sum)
        self.opt.synchronize()  # a rank without samples submits zeros
        total = self.state.sampler.step_samples
        for p in self.model.parameters():
            p.grad.div_(total)
        hvd.synchronize(h)
        for g in self.opt.param_groups:
            g["lr"] = self.lr_now()
        with self.opt.skip_synchronize():
            self.opt.step()
        self.state.loss_sum += loss.item()

    def evaluate(self):
        """Test accuracy: each rank classifies its share, the counts are summed."""
        x, y = self.test
        n, r, w = len(y), hvd.rank(), hvd.size()
        lo, hi = n * r // w, n * (r + 1) // w
        correct = torch.zeros(1, dtype=torch.int64)
        self.model.eval()
        with torch.no_grad():
            for s in range(lo, hi, 500):
                e = min(hi, s + 500)
                correct += (self.model(x[s:e]).argmax(1) == y[s:e]).sum()
        self.model.train()
        hvd.allreduce_(correct, name="eval.correct", op=hvd.Sum)
        return correct.item() / n

    def print_report(self):
        """Rank 0 prints the line of the epoch the state has just completed, once."""
        rep = self.report
        if (self.printed >= self.state.epoch or rep is None or
                rep["epoch"] + 1 != self.state.epoch or hvd.rank() != 0):
            return
        self.printed = self.state.epoch
        self.emit(self.PREFIX +
                  "epoch=%d size=%d generation=%d rank0=%s samples=%d duplicates=%d exact=%d "
                  "loss=%.4f accuracy=%.4f seconds=%.2f" %
                  (rep["epoch"], rep["size"], rep["generation"], hv.host_name(), rep["samples"],
                   rep["duplicates"], rep["exact"], rep["loss"], rep["accuracy"], rep["seconds"]))

    def emit(self, line):
        """Rank 0 writes an epoch's line."""
        print(line, flush=True)

    def confirm(self):
        """Every rank takes rank 0's word for which epochs were printed: a survivor that
        becomes rank 0 then neither repeats nor loses a line."""
        t = torch.tensor([self.printed if hvd.rank() == 0 else 0], dtype=torch.int64)
        hvd.allreduce_(t, name="report.printed", op=hvd.Max)
        self.printed = max(self.printed, int(t.item()))

    def run(self, state):
        """The training function under hvd.elastic.run: called again after every reset (after
        a sync from rank 0), so it goes on from the state, never from local variables."""
        self.resume(state)
        while state.epoch < self.a.epochs:
            self.train_epoch(state)
            self.end_epoch(state)

    def resume(self, state):
        """What run() does first, on entry and after every reset."""
        if not self.entered:
            self.entered = True
            self.printed = state.epoch  # a worker that joins does not print earlier epochs
        else:
            self.print_report()  # an epoch's end whose line the rank 0 before did not print
        self.confirm()
        if state.first_gen == 0:
            state.first_gen = hvd.elastic.generation()  # --kill-at acts in this generation only
            state.commit()

    def train_epoch(self, state):
        """The rest of the current epoch's steps, each committed."""
        if self.timed_epoch != state.epoch:
            self.timed_epoch, self.t_start = state.epoch, time.monotonic()
        for idx in state.sampler.batches():
            self.maybe_kill()
            self.step(idx)
            state.batch += 1
            state.commit()
            if self.a.step_delay_ms:
                time.sleep(self.a.step_delay_ms / 1000.0)

    def end_epoch(self, state):
        """The epoch's report and test accuracy; the next epoch committed, then the line."""
        n = len(self.train[1])
        st = state.sampler.stats()
        accuracy = self.evaluate()
        state.sampler.next_epoch()
        self.report = dict(
            epoch=state.epoch, size=hvd.size(), generation=hvd.elastic.generation(),
            samples=st["processed"], duplicates=st["duplicates"],
            exact=int(st["processed"] == n and st["duplicates"] == 0 and
                      st["checksum"] == n * (n - 1) // 2),
            loss=state.loss_sum / max(st["processed"], 1), accuracy=accuracy,
            seconds=time.monotonic() - self.t_start)
        state.epoch += 1
        state.batch = 0
        state.loss_sum = 0.0
        state.accuracy = accuracy
        reset = None
        try:
            state.commit()  # the next epoch is committed before its line is printed
        except hvd.HostsUpdatedInterrupt as exc:
            reset = exc
        self.print_report()
        self.confirm()
        if reset is not None:
            raise reset


def main(argv):
    a = parse_args(argv)
    hvd.init()
    threads = a.threads or max(1, (os.cpu_count() or 1) // max(1, hvd.local_size()))
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    t0 = time.monotonic()
    try:
        train = load_split(a.data, "train", a.train_limit)
        test = load_split(a.data, "t10k", a.test_limit)
    except (OSError, ValueError) as exc:
        sys.stderr.write("train_fmnist: cannot load the data set: %s\n" % exc)
        return 1
    if hvd.rank() == 0:
        sys.stderr.write("train_fmnist: %d training and %d test samples from %s in %.1f s; "
                         "%d workers, %d threads each, batch %d per rank\n" %
                         (len(train[1]), len(test[1]), a.data, time.monotonic() - t0,
                          hvd.size(), threads, a.batch_size))
    model = Net()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=a.lr * hvd.size(), momentum=0.9),
        named_parameters=model.named_parameters(), op=hvd.Sum)
    sampler = hvd.elastic.ElasticSampler(train[1], shuffle=True, seed=a.seed,
                                         batch_size=a.batch_size)
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=0, batch=0,
                                   first_gen=0, loss_sum=0.0, accuracy=0.0)
    trainer = Trainer(a, train, test, model, opt, state)
    state.register_reset_callbacks([trainer.on_reset])
    hvd.elastic.run(trainer.run)(state)
    if state.removed:
        sys.stderr.write("train_fmnist: removed from the job (generation %d)\n" %
                         hvd.elastic.generation())
    elif hvd.rank() == 0:
        print("train_fmnist: done epochs=%d accuracy=%.4f resets=%d" %
              (state.epoch, state.accuracy, state.resets), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
