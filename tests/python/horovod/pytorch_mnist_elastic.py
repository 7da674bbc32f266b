"""pytorch_mnist_elastic.py: Elastic Horovod's PyTorch pattern, written from Horovod's
documentation (docs/elastic.rst, "Elastic PyTorch") and its examples
(examples/elastic/pytorch/pytorch_mnist_elastic.py, pytorch_imagenet_resnet50_elastic.py), on
Fashion-MNIST. Only the import differs from a Horovod script:

    import hv.torch as hvd          # was: import horovod.torch as hvd

The Horovod pattern: a DataLoader over an hvd.elastic.ElasticSampler(dataset, shuffle=True,
seed=...), the sampler in hvd.elastic.TorchState(model=..., optimizer=..., sampler=...,
epoch=0, batch=0), `for state.batch, (data, target) in enumerate(loader, start=state.batch)`,
state.sampler.record_batch(state.batch, batch_size) after every step, state.commit() every
--batches-per-commit steps, and at the end of an epoch state.sampler.set_epoch(epoch) and a
commit; @hvd.elastic.run; a reset callback that rescales the learning rate. The script ends
without hvd.shutdown(), as Horovod's examples do.

For tests (tests/integration/python_horovod_elastic.sh): --index-log DIR makes every rank
write, before each commit, the indices of the samples whose updates that commit holds (one
file per process), and after every (re)entry into the training function the commit count it
starts from; tests/python/horovod/check_indices.py then checks that every epoch trained on
every sample exactly once, whatever failed in between. --step-delay-ms slows the steps down so
that a test can kill a worker in the middle of an epoch; --stop-file PATH ends the run at the
first epoch's end after PATH exists (a test waits for what it wants to see, not for a number of
epochs).

Rank 0 prints one line per epoch: "pytorch_mnist_elastic: epoch=E size=W loss=L" and at the
end "pytorch_mnist_elastic: done epochs=E accuracy=A".
"""

import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data

import hv.torch as hvd

# The Fashion-MNIST reader of hv's example (shipped beside this script, or from the tree).
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                             os.pardir, "examples", "python"))
sys.dont_write_bytecode = True
from train_fmnist import DEFAULT_DATA, load_split  # noqa: E402

parser = argparse.ArgumentParser(description="Elastic PyTorch Fashion-MNIST (Horovod's pattern)")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size per rank")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--batches-per-commit", type=int, default=4)
parser.add_argument("--data-dir", default=os.environ.get("HV_FMNIST_DIR") or DEFAULT_DATA)
parser.add_argument("--train-limit", type=int, default=0)
parser.add_argument("--test-limit", type=int, default=1000)
parser.add_argument("--step-delay-ms", type=int, default=0)
parser.add_argument("--index-log", metavar="DIR")
parser.add_argument("--stop-file", metavar="PATH",
                    help="train until PATH exists (seen by rank 0 at an epoch's end, agreed by "
                    "every rank, committed), at most --epochs epochs")
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

train_x, train_y = load_split(args.data_dir, "train", args.train_limit)
test_x, test_y = load_split(args.data_dir, "t10k", args.test_limit)


class IndexedDataset(torch.utils.data.Dataset):
    """(image, label, index): the index lets the test log which samples each step used."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i], i


train_dataset = IndexedDataset(train_x, train_y)
train_sampler = hvd.elastic.ElasticSampler(train_dataset, shuffle=True, seed=args.seed)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                           sampler=train_sampler)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


model = Net()
optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=args.momentum)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


class IndexLog:
    """The test's record of which samples the committed state was trained on: the indices of
    the steps since the last commit are written just before each commit, tagged with the commit
    count, and every (re)entry into train() writes the commit count the state was restored to
    (entries above it, written before, were rolled back)."""

    def __init__(self, directory):
        self.f = None
        if directory:
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, "%s-%d.log" % (os.uname().nodename, os.getpid()))
            self.f = open(path, "a", buffering=1)
        self.pending = []

    def step(self, epoch, index):
        self.pending.append((epoch, index.tolist()))

    def before_commit(self, commits):
        if self.f is not None:
            for epoch, idx in self.pending:
                self.f.write("%.6f commit=%d epoch=%d %s\n" %
                             (time.time(), commits, epoch, " ".join(map(str, idx))))
        self.pending = []

    def entered(self, commits):
        self.pending = []
        if self.f is not None:
            self.f.write("%.6f restart commits=%d\n" % (time.time(), commits))


log = IndexLog(args.index_log)


def commit(state):
    state.commits += 1
    log.before_commit(state.commits)
    state.commit()


def metric_average(val, name):
    return hvd.allreduce(torch.tensor(val), name=name).item()


def end_epoch(state, loss_sum, steps):
    loss = metric_average(loss_sum / max(steps, 1), "avg_loss")
    if hvd.rank() == 0:
        print("pytorch_mnist_elastic: epoch=%d size=%d loss=%.4f" % (state.epoch, hvd.size(),
                                                                    loss), flush=True)
    if args.stop_file:
        seen = int(hvd.rank() == 0 and os.path.exists(args.stop_file))
        state.stop = int(hvd.allreduce(torch.tensor([seen]), name="stop", op=hvd.Max).item())
    state.epoch += 1
    state.batch = 0
    state.sampler.set_epoch(state.epoch)
    commit(state)


@hvd.elastic.run
def train(state):
    log.entered(state.commits)
    while state.epoch < args.epochs and not state.stop:
        state.model.train()
        loss_sum, steps = 0.0, 0
        for state.batch, (data, target, index) in enumerate(train_loader, start=state.batch):
            state.optimizer.zero_grad()
            output = state.model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            state.optimizer.step()
            loss_sum, steps = loss_sum + loss.item(), steps + 1
            state.sampler.record_batch(state.batch, args.batch_size)
            log.step(state.epoch, index)
            if (state.batch + 1) % args.batches_per_commit == 0:
                commit(state)
            if args.step_delay_ms:
                time.sleep(args.step_delay_ms / 1000.0)
        end_epoch(state, loss_sum, steps)


def on_state_reset():
    # adjust learning rate on reset
    for param_group in optimizer.param_groups:
        param_group["lr"] = args.lr * hvd.size()


def test():
    model.eval()
    with torch.no_grad():
        correct = (model(test_x).argmax(1) == test_y).sum().float()
    return correct.item() / len(test_y)


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=train_sampler,
                               epoch=0, batch=0, commits=0, stop=0)
state.register_reset_callbacks([on_state_reset])
train(state)
accuracy = test()
if hvd.rank() == 0:
    print("pytorch_mnist_elastic: done epochs=%d accuracy=%.4f" % (state.epoch, accuracy),
          flush=True)
