"""train_ddp.py: examples/python/train_fmnist.py's training written as a DistributedDataParallel
script, elastic on hv.

The same CNN, data, learning-rate schedule and output format as train_fmnist.py (whose data
loader, model and epoch bookkeeping it imports), but the model is wrapped as a DDP script wraps
it, and the optimizer is the plain torch one:

    hvd.init()                                          # was: dist.init_process_group("gloo")
    model = hvd.parallel.DistributedDataParallel(Net())  # was: torch's DistributedDataParallel
    opt = torch.optim.SGD(model.parameters(), ...)

DDP averages the gradients over the ranks in buckets while backward runs; each rank's loss is
scaled by size / (the step's sample count over all ranks), so the average is the batch mean.
Elastic as train_fmnist.py: hvd.elastic.TorchState(model, opt, sampler=...) commits the DDP
model's parameters (its state_dict, "module." names) and the optimizer's momentum after every
step, restores them after a worker's failure (SIGKILL: rollback) and gives them to a worker that
joins (a growth schedule); hvd.elastic.run runs the training again after every change. A worker
that joins a running job does not broadcast at construction (DDP's init_sync): the state's sync
does it.

Output (stdout, rank 0): train_fmnist.py's lines with the prefix "train_ddp: ".

Run it (--workdir ships train_fmnist.py beside it):
  hvsubmit -np 2 --workdir examples/python -- python3 examples/python/train_ddp.py --epochs 3
                                            (--min-np/--max-np, --grow: elastic)
"""

import os
import sys

import hv.torch as hvd  # before torch: a node without torch fails with one clear line

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_fmnist  # noqa: E402  (the data, the model, the epoch bookkeeping)


class DDPTrainer(train_fmnist.Trainer):
    """train_fmnist's Trainer with a DDP step: plain backward and optimizer."""

    PREFIX = "train_ddp: "

    def on_reset(self):
        old, self.peak_lr = self.peak_lr, self.a.lr * hvd.size()
        if hvd.rank() == 0:
            sys.stderr.write("train_ddp: reset: %d workers (generation %d); peak learning "
                             "rate %.4g -> %.4g\n" % (hvd.size(), hvd.elastic.generation(), old,
                                                       self.peak_lr))

    def step(self, idx):
        """One step on this rank's samples idx (maybe none: the rank still takes part in the
        buckets' allreduces, with zero gradients)."""
        x, y = self.train
        total = self.state.sampler.step_samples
        self.opt.zero_grad()
        i = torch.tensor(idx, dtype=torch.int64)
        lsum = F.cross_entropy(self.model(x[i]), y[i], reduction="sum")
        loss = torch.tensor([lsum.item()], dtype=torch.float64)
        h = hvd.allreduce_async_(loss, name="loss", op=hvd.Sum)
        # DDP averages over the ranks: size / total makes it the mean over the step's samples.
        (lsum * (hvd.size() / max(total, 1))).backward()
        hvd.synchronize(h)
        for g in self.opt.param_groups:
            g["lr"] = self.lr_now()
        self.opt.step()
        self.state.loss_sum += loss.item()


def main(argv):
    a = train_fmnist.parse_args(argv)
    hvd.init()
    threads = a.threads or max(1, (os.cpu_count() or 1) // max(1, hvd.local_size()))
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    try:
        train = train_fmnist.load_split(a.data, "train", a.train_limit)
        test = train_fmnist.load_split(a.data, "t10k", a.test_limit)
    except (OSError, ValueError) as exc:
        sys.stderr.write("train_ddp: cannot load the data set: %s\n" % exc)
        return 1
    if hvd.rank() == 0:
        sys.stderr.write("train_ddp: %d training samples; %d workers (RANK=%s WORLD_SIZE=%s at "
                         "start), %d threads each, batch %d per rank\n" %
                         (len(train[1]), hvd.size(), os.environ.get("RANK"),
                          os.environ.get("WORLD_SIZE"), threads, a.batch_size))
    model = hvd.parallel.DistributedDataParallel(train_fmnist.Net())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr * hvd.size(), momentum=0.9)
    sampler = hvd.elastic.ElasticSampler(train[1], shuffle=True, seed=a.seed,
                                         batch_size=a.batch_size)
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=0, batch=0,
                                   first_gen=0, loss_sum=0.0, accuracy=0.0)
    trainer = DDPTrainer(a, train, test, model, opt, state)
    state.register_reset_callbacks([trainer.on_reset])
    hvd.elastic.run(trainer.run)(state)
    if state.removed:
        sys.stderr.write("train_ddp: removed from the job (generation %d)\n" %
                         hvd.elastic.generation())
    elif hvd.rank() == 0:
        print("train_ddp: done epochs=%d accuracy=%.4f resets=%d" %
              (state.epoch, state.accuracy, state.resets), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
