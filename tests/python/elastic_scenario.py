"""elastic_scenario.py: a small elastic PyTorch program for the end-to-end tests of Elastic
Horovod's scenarios run from Python (tests/integration/python_elastic_{failure,grow_drain,min_np}.sh,
issue 14, section 6); the Python counterpart of examples/elastic_train's test options.

A tiny MLP (16-32-4) learns a synthetic task (4 classes: the argmax of a fixed random linear
map of 16 Gaussian features; the data depend on --data-seed only, the weights and shuffling on
--seed) through hv.torch: DistributedOptimizer (op Sum, divided by the step's global sample
count), hv.torch.elastic.TorchState (model, optimizer, sampler, scalars), ElasticSampler with a
constant global batch (the same optimisation at any world size), @hvd.elastic.run and a reset
callback. The training loop is examples/python/train_fmnist.py's (its Trainer, with this
program's faults, constant learning rate, output and stop file). It takes a second or two per
epoch, mostly the --step-delay-ms the tests ask for.

Output, as examples/elastic_train prints it (stdout, rank 0):
  elastic_scenario: epoch=E size=W generation=G rank0=NODE samples=S duplicates=D exact=X
                    loss=L accuracy=A seconds=T            (one line)
  elastic_scenario: done epochs=E accuracy=A resets=R
and on stderr, rank 0, after every reset:
  elastic_scenario: reset: W workers (generation G)
A worker removed by a drain prints "elastic_scenario: removed from the job (generation G)" on
stderr and exits 0. A worker whose re-join the head refused because the job ended (it may hear
that before the head's kill comes) prints "elastic_scenario: the job cannot go on: ..." on
stderr and exits 1; any other error is raised.

Options (faults act in the job's first generation only, unless :every):
  --epochs N --train-limit N --test-limit N --batch N (global) --lr X --seed N
  --step-delay-ms N        sleep after every step (lets a test act in the middle of an epoch)
  --kill-at E:B:R          the worker of rank R kills itself (SIGKILL) at step B of epoch E
  --exit-at E:B:R:CODE[:every]  the worker of rank R (or `all`) exits with CODE there
  --epoch-log PATH         rank 0 appends each epoch's line to PATH too, before stdout, and a
                           rank 0 that takes over does not print a line PATH already holds
  --stop-file PATH         train until PATH exists (seen by rank 0 at an epoch's end, agreed by
                           every rank and committed with the epoch), at most --epochs epochs:
                           a test ends the job when it has seen what it waits for, however long
                           Python takes to start on a loaded machine
"""

import argparse
import os
import signal
import sys

import hv.torch as hvd  # before torch: a node without torch fails with one clear line
from hv.errors import HvError

import torch

# The example's training loop: shipped beside this file (hvsubmit --file, as
# tests/python/elastic_scenario.sh does), else from the source tree; no bytecode written there.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                             "examples", "python"))
sys.dont_write_bytecode = True
import train_fmnist  # noqa: E402

FEATURES, HIDDEN, CLASSES = 16, 32, 4
PREFIX = "elastic_scenario: "


def parse_fault(p, text, name, with_code):
    parts = text.split(":")
    every = with_code and len(parts) == 5 and parts[4] == "every"
    if every:
        parts = parts[:4]
    try:
        if len(parts) != (4 if with_code else 3):
            raise ValueError
        e, b = int(parts[0]), int(parts[1])
        r = -1 if with_code and parts[2] == "all" else int(parts[2])
        code = int(parts[3]) if with_code else 0
        if min(e, b) < 0 or (r < 0 and parts[2] != "all"):
            raise ValueError
    except ValueError:
        p.error("%s: expected %s, got %r" % (name, "E:B:R:CODE[:every] (R a rank or all)"
                                             if with_code else "E:B:R", text))
    return (e, b, r, code, every)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="elastic_scenario.py",
                                description="A tiny elastic PyTorch program for hv's tests.")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--train-limit", type=int, default=1024, help="training samples")
    p.add_argument("--test-limit", type=int, default=512, help="test samples")
    p.add_argument("--batch", type=int, default=64, help="global batch (all ranks)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-seed", type=int, default=1234)
    p.add_argument("--step-delay-ms", type=int, default=0)
    p.add_argument("--kill-at", metavar="E:B:R")
    p.add_argument("--exit-at", metavar="E:B:R:CODE[:every]")
    p.add_argument("--epoch-log", metavar="PATH")
    p.add_argument("--stop-file", metavar="PATH")
    a = p.parse_args(argv)
    if min(a.epochs, a.train_limit, a.test_limit, a.batch) < 1:
        p.error("--epochs, --train-limit, --test-limit and --batch must be at least 1")
    a.kill_at = parse_fault(p, a.kill_at, "--kill-at", False) if a.kill_at else None
    a.exit_at = parse_fault(p, a.exit_at, "--exit-at", True) if a.exit_at else None
    return a


def make_data(seed, n_train, n_test):
    """Gaussian features; the label is the argmax of a fixed random linear map (learnable)."""
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(FEATURES, CLASSES, generator=g)
    x = torch.randn(n_train + n_test, FEATURES, generator=g)
    y = (x @ teacher).argmax(1)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


class Trainer(train_fmnist.Trainer):
    """train_fmnist's loop with this program's faults, output and stop file; the learning rate
    stays --lr."""

    PREFIX = PREFIX

    def lr_now(self):
        return self.a.lr

    def on_reset(self):
        if hvd.rank() == 0:
            sys.stderr.write(PREFIX + "reset: %d workers (generation %d)\n" %
                             (hvd.size(), hvd.elastic.generation()))

    def maybe_kill(self):
        """--kill-at and --exit-at, before each step."""
        s = self.state
        for f, kill in ((self.a.kill_at, True), (self.a.exit_at, False)):
            if f is None:
                continue
            e, b, r, code, every = f
            if ((s.epoch, s.batch) != (e, b) or (r >= 0 and r != hvd.rank()) or
                    (not every and hvd.elastic.generation() != s.first_gen)):
                continue
            what = "killing myself (SIGKILL)" if kill else "exiting with status %d" % code
            sys.stderr.write(PREFIX + "rank %d: %s at epoch %d step %d\n" %
                             (hvd.rank(), what, s.epoch, s.batch))
            sys.stderr.flush()
            sys.stdout.flush()
            if kill:
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(code)

    def logged(self, epoch):
        try:
            with open(self.a.epoch_log) as f:
                return any(line.startswith(PREFIX + "epoch=%d " % epoch) for line in f)
        except FileNotFoundError:
            return False

    def emit(self, line):
        if self.a.epoch_log:
            if self.logged(self.report["epoch"]):
                return  # the rank 0 before this one wrote it
            with open(self.a.epoch_log, "a") as f:
                f.write(line + "\n")
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def run(self, state):
        """train_fmnist's run(), ending early at --stop-file."""
        self.resume(state)
        while state.epoch < min(self.a.epochs, state.stop_at or self.a.epochs):
            self.train_epoch(state)
            if self.a.stop_file and not state.stop_at:
                t = torch.tensor([int(hvd.rank() == 0 and os.path.exists(self.a.stop_file))])
                hvd.allreduce_(t, name="stop", op=hvd.Max)
                if t.item():
                    state.stop_at = state.epoch + 1  # committed with the epoch in end_epoch
            self.end_epoch(state)


def main(argv):
    a = parse_args(argv)
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    train, test = make_data(a.data_seed, a.train_limit, a.test_limit)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, CLASSES))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9),
                                   named_parameters=model.named_parameters(), op=hvd.Sum)
    sampler = hvd.elastic.ElasticSampler(train[1], shuffle=True, seed=a.seed,
                                         batch_size=a.batch, global_batch=True)
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=0, batch=0,
                                   first_gen=0, loss_sum=0.0, accuracy=0.0, stop_at=0)
    trainer = Trainer(a, train, test, model, opt, state)
    state.register_reset_callbacks([trainer.on_reset])
    try:
        hvd.elastic.run(trainer.run)(state)
    except HvError as exc:
        if exc.errname not in ("HV_EAUTH", "HV_ESTATE"):
            raise
        # The head ended the job (a reset past --max-resets, too few workers) and this worker
        # learnt it itself (its re-join refused) before the head's kill reached it: the head
        # tells the user why; a program just stops.
        sys.stderr.write(PREFIX + "the job cannot go on: %s\n" % exc)
        return 1
    if state.removed:
        sys.stderr.write(PREFIX + "removed from the job (generation %d)\n" %
                         hvd.elastic.generation())
    elif hvd.rank() == 0:
        print(PREFIX + "done epochs=%d accuracy=%.4f resets=%d" %
              (state.epoch, state.accuracy, state.resets), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
