"""pytorch_synthetic_benchmark_elastic.py: Horovod's elastic synthetic benchmark
(examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py), written from it with only the
import changed (`import hv.torch as hvd`) and a small convolutional network of its own in place of
torchvision's models (Debian's torch has no torchvision): img/sec of training steps on fixed
random data, under @hvd.elastic.run, with a TorchState that holds Python objects beside the
model (img_secs=[], warm=False) and a reset callback. The script ends without hvd.shutdown().

Rank 0 prints Horovod's lines ("Iter #N: X img/sec per CPU", "Img/sec per CPU: ...", "Total
img/sec on W CPU(s): ...") and, for the test (tests/integration/python_horovod_benchmark.sh),
"synthetic: done iters=N img_secs=K resets=R".
"""

import argparse
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import hv.torch as hvd

# Benchmark settings
parser = argparse.ArgumentParser(description='PyTorch Synthetic Benchmark',
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--fp16-allreduce', action='store_true', default=False,
                    help='use fp16 compression during allreduce')
parser.add_argument('--model', type=str, default='smallnet', help='model to benchmark')
parser.add_argument('--batch-size', type=int, default=16, help='input batch size')
parser.add_argument('--image-size', type=int, default=32, help='side of the square images')
parser.add_argument('--num-warmup-batches', type=int, default=2,
                    help='number of warm-up batches that don\'t count towards benchmark')
parser.add_argument('--num-batches-per-iter', type=int, default=5,
                    help='number of batches per benchmark iteration')
parser.add_argument('--num-iters', type=int, default=10, help='number of benchmark iterations')
parser.add_argument('--num-batches-per-commit', type=int, default=1,
                    help='number of batches per commit of the elastic state object')
parser.add_argument('--use-adasum', action='store_true', default=False,
                    help='use adasum algorithm to do reduction')
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)


class SmallNet(nn.Module):
    """A small ResNet-like network (torchvision is not on the nodes)."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv3 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(x + self.conv2(x))
        x = F.relu(self.conv3(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


models = {'smallnet': SmallNet}
model = models[args.model]()


def lr_scaler():
    return hvd.size() if not args.use_adasum else 1


lr = 0.01
optimizer = optim.SGD(model.parameters(), lr=lr * lr_scaler())

# Horovod: (optional) compression algorithm.
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

# Horovod: wrap optimizer with DistributedOptimizer.
optimizer = hvd.DistributedOptimizer(optimizer,
                                     named_parameters=model.named_parameters(),
                                     compression=compression,
                                     op=hvd.Adasum if args.use_adasum else hvd.Average)

# Set up fixed fake data
data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
target = torch.LongTensor(args.batch_size).random_() % 1000


def benchmark_step(state):
    optimizer.zero_grad()
    output = model(data)
    loss = F.cross_entropy(output, target)
    loss.backward()
    optimizer.step()

    state.batch += 1
    if state.batch == args.num_batches_per_commit:
        state.batch = 0
        state.commit()


def log(s, nl=True):
    if hvd.rank() != 0:
        return
    print(s, end='\n' if nl else '', flush=True)


log('Model: %s' % args.model)
log('Batch size: %d' % args.batch_size)
device = 'CPU'
log('Number of %ss: %d' % (device, hvd.size()))


@hvd.elastic.run
def run_benchmark(state):
    # Horovod: elastic training requires a state object to track progress
    if not state.warm:
        # Warm-up
        log('Running warmup...')
        timeit.timeit(lambda: benchmark_step(state), number=args.num_warmup_batches)
        state.warm = True
        state.commit()

    # Benchmark
    if state.iter == 0:
        log('Running benchmark...')
    for x in range(state.iter, args.num_iters):
        time = timeit.timeit(lambda: benchmark_step(state), number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log('Iter #%d: %.1f img/sec per %s' % (x, img_sec, device))
        state.img_secs.append(img_sec)
        state.iter = x + 1
        state.commit()


# adjust learning rate on reset
def on_state_reset():
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr * lr_scaler()


state = hvd.elastic.TorchState(model, optimizer, img_secs=[], iter=0, batch=0, warm=False)
state.register_reset_callbacks([on_state_reset])
run_benchmark(state)

# Results
img_sec_mean = np.mean(state.img_secs)
img_sec_conf = 1.96 * np.std(state.img_secs)
log('Img/sec per %s: %.1f +-%.1f' % (device, img_sec_mean, img_sec_conf))
log('Total img/sec on %d %s(s): %.1f +-%.1f' %
    (hvd.size(), device, hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))
log('synthetic: done iters=%d img_secs=%d resets=%d' % (state.iter, len(state.img_secs),
                                                        state.resets))
