#!/usr/bin/python3
"""bench_torch_bert.py: one training step of a BERT-base-sized gradient set with hv.torch's
DistributedOptimizer against DistributedDataParallel on Gloo, side by side in the same two
processes. Run through tests/perf/bench_torch_bert.sh (one command).

    bench_torch_bert.py --launch N --pypath DIR [--steps S] [--reps R] [--layers L]
                                                forks N ranks (hv: a temporary HV_RDZV_DIR, no
                                                head; Gloo: a loopback TCP store)

The model: BERT-base's 199 parameter tensors and their shapes (110 M float32 parameters, 418 MiB
of gradients): word, position and token-type embeddings (30522x768, 512x768, 2x768) and their
LayerNorm, 12 encoder layers (query, key, value and output 768x768 with biases, LayerNorm,
768x3072 and 3072x768 with biases, LayerNorm), the pooler (768x768 and bias). Its forward is a
chain, loss = (...((p_1.sum() * c) + p_2.sum() * c) ... + p_199.sum() * c), so backward is one
elementwise pass per parameter (the gradient c broadcast into .grad) and hands the gradients to
the reduction's hooks in reverse registration order, one by one, as a real backward does (output
layers first). Both sides have their own copy of the model and do the same work around the
reduction:

  hv    opt.zero_grad(); loss(model).backward(); opt.step()      opt = hvd.DistributedOptimizer(SGD)
  ddp   opt.zero_grad(); loss(ddp).backward(); opt.step()        ddp = DistributedDataParallel
                                                                  (defaults: 25 MiB buckets)

A timed block is S steps after a barrier; the kinds alternate (hv, ddp, ddp, hv, ...). Rank 0
prints ROW <kind> <rep> <ms per step> per block, then checks that both sides computed the same
parameters (the average of equal gradients is exact, so they must agree to rounding).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_launch  # noqa: E402

HIDDEN, INTER, VOCAB, POSITIONS, TYPES = 768, 3072, 30522, 512, 2


def bert_shapes(layers=12):
    """(name, shape) of BERT-base's trainable parameters, in registration order."""
    s = [("embeddings.word_embeddings.weight", (VOCAB, HIDDEN)),
         ("embeddings.position_embeddings.weight", (POSITIONS, HIDDEN)),
         ("embeddings.token_type_embeddings.weight", (TYPES, HIDDEN)),
         ("embeddings.LayerNorm.weight", (HIDDEN,)), ("embeddings.LayerNorm.bias", (HIDDEN,))]
    for i in range(layers):
        p = "encoder.layer.%d." % i
        for m in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            s += [(p + m + ".weight", (HIDDEN, HIDDEN)), (p + m + ".bias", (HIDDEN,))]
        s += [(p + "attention.output.LayerNorm.weight", (HIDDEN,)),
              (p + "attention.output.LayerNorm.bias", (HIDDEN,)),
              (p + "intermediate.dense.weight", (INTER, HIDDEN)),
              (p + "intermediate.dense.bias", (INTER,)),
              (p + "output.dense.weight", (HIDDEN, INTER)), (p + "output.dense.bias", (HIDDEN,)),
              (p + "output.LayerNorm.weight", (HIDDEN,)), (p + "output.LayerNorm.bias", (HIDDEN,))]
    s += [("pooler.dense.weight", (HIDDEN, HIDDEN)), ("pooler.dense.bias", (HIDDEN,))]
    return s


def make_model(torch, layers, rank):
    class Bert(torch.nn.Module):
        """BERT-base's parameters; forward is the cheap chain of the module docstring, with a
        per-rank factor so that the ranks' gradients differ (the average is checked)."""

        def __init__(self):
            super().__init__()
            self.names = []
            for name, shape in bert_shapes(layers):
                key = name.replace(".", "_")
                self.register_parameter(key, torch.nn.Parameter(torch.zeros(shape)))
                self.names.append(key)
            self.c = float(rank + 1)

        def forward(self):
            loss = None
            for k in self.names:
                term = getattr(self, k).sum() * self.c
                loss = term if loss is None else loss + term
            return loss
    return Bert()


def rank_main(steps, reps, layers):
    import torch
    import torch.distributed as dist
    import hv.torch as hvd
    torch.set_num_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    dist.init_process_group("gloo", rank=rank, world_size=size)

    hv_model = make_model(torch, layers, rank)
    hv_opt = hvd.DistributedOptimizer(torch.optim.SGD(hv_model.parameters(), lr=1e-3),
                                      named_parameters=hv_model.named_parameters())
    ddp_model = make_model(torch, layers, rank)
    ddp = torch.nn.parallel.DistributedDataParallel(ddp_model)
    ddp_opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    nparams = sum(p.numel() for p in hv_model.parameters())
    if rank == 0:
        print("INFO tensors=%d parameters=%d gradient_bytes=%d" %
              (len(list(hv_model.parameters())), nparams, nparams * 4), flush=True)

    def hv_step():
        hv_opt.zero_grad()
        hv_model().backward()
        hv_opt.step()

    def ddp_step():
        ddp_opt.zero_grad()
        ddp().backward()
        ddp_opt.step()

    kinds = {"hv": (hv_step, hvd.barrier), "ddp": (ddp_step, dist.barrier)}
    for fn, _ in kinds.values():  # warm-up: allocates .grad, DDP's buckets, hv's buffers
        fn()
        fn()
    for r in range(reps):
        order = ["hv", "ddp"] if r % 2 == 0 else ["ddp", "hv"]
        for k in order:
            fn, barrier = kinds[k]
            barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            ms = (time.perf_counter() - t0) / steps * 1e3
            if rank == 0:
                print("ROW %s %d %.1f" % (k, r, ms), flush=True)
    # Both sides applied the same averaged gradients the same number of times.
    worst = max(float((a - b).abs().max()) for a, b in zip(hv_model.parameters(),
                                                           ddp_model.parameters()))
    expect = -1e-3 * (2 + reps * steps) * sum(range(1, size + 1)) / size
    off = abs(float(hv_model.pooler_dense_bias[0]) - expect)
    if rank == 0:
        print("CHECK hv-vs-ddp max difference %.3g, hv parameter %.6f (expected %.6f)" %
              (worst, float(hv_model.pooler_dense_bias[0]), expect), flush=True)
    dist.destroy_process_group()
    hvd.shutdown()
    return 0 if worst <= 1e-5 and off <= 1e-4 else 1


def launch(n, pypath, argv):
    return torch_launch.launch(n, pypath, __file__, argv, prefix="hv-bench-bert-")


def main(argv):
    n, pypath, steps, reps, layers = 0, None, 3, 5, 12
    rest = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if i + 1 >= len(argv):
            print("bench_torch_bert.py: %s needs a value" % a, file=sys.stderr)
            return 2
        if a == "--launch":
            n = int(argv[i + 1])
        elif a == "--pypath":
            pypath = argv[i + 1]
        elif a in ("--steps", "--reps", "--layers"):
            v = int(argv[i + 1])
            if a == "--steps":
                steps = v
            elif a == "--reps":
                reps = v
            else:
                layers = v
            rest += [a, argv[i + 1]]
        else:
            print("bench_torch_bert.py: unknown argument %s" % a, file=sys.stderr)
            return 2
        i += 2
    if n > 0:
        return launch(n, pypath or "", rest)
    return rank_main(steps, reps, layers)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
