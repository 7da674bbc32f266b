#!/usr/bin/python3
"""bench_elastic_python.py: the Python twin of tests/perf/bench_elastic.c, for the reset latency
of an elastic job written with hv.torch (tests/perf/bench_elastic.sh --python runs it in place
of the C program, through hvsubmit -- python3 and hvagent, and reads the same lines).

    bench_elastic_python.py [--model BYTES] [--seconds S] [--steps N] [--step-ms MS]

Every step, as the C program: an allreduce (Average, in place) of a model-sized float32 tensor
and a commit of the elastic state (hv.torch.elastic.TorchState: the tensor and the step count),
then a sleep of --step-ms; the training function runs under hv.torch.elastic.run. It prints,
with wall-clock milliseconds:
  BENCH fail  <t> gen=G rank=R rc=NAME step=S     the training function saw a peer fail
  BENCH reset <t> gen=G size=N rollback=B old=G'  after the new round formed and synced
                                                  (B and G' are not known in Python: -1 and 0)
  BENCH step  <t> gen=G size=N step=S             the first step completed in a round
  BENCH lost  <t> gen=G steps=K                   steps rolled back (restore) at a reset
  BENCH left  <t> gen=G                           this worker was drained out
"""

import sys
import time

import hv.torch as hvd  # before torch: a node without torch gets hv's one-line message
import hv.torch.elastic as elastic
import torch


def wall_ms():
    return int(time.time() * 1000)


def say(line):
    print("BENCH %s" % line, flush=True)


class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("w", torch.zeros(n, dtype=torch.float32))


def main(argv):
    model_bytes, seconds, max_steps, step_ms = 1 << 20, 120.0, 0, 5
    i = 1
    while i < len(argv):
        a = argv[i]
        if i + 1 >= len(argv):
            print("bench_elastic_python: %s needs a value" % a, file=sys.stderr)
            return 2
        v = argv[i + 1]
        if a == "--model":
            model_bytes = int(v)
        elif a == "--seconds":
            seconds = float(v)
        elif a == "--steps":
            max_steps = int(v)
        elif a == "--step-ms":
            step_ms = int(v)
        else:
            print("bench_elastic_python: unknown option %s" % a, file=sys.stderr)
            return 2
        i += 2
    n = model_bytes // 4
    if n < 1:
        print("bench_elastic_python: bad --model", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    hvd.init()
    model = Model(n)
    state = elastic.TorchState(model, None, step=0)
    deadline = wall_ms() + int(seconds * 1000)
    seen = {"step": 0, "printed_gen": 0}

    def on_reset():
        say("reset %d gen=%d size=%d rollback=-1 old=0" % (wall_ms(), elastic.generation(),
                                                           hvd.size()))
        if seen["step"] > state.step:
            say("lost %d gen=%d steps=%d" % (wall_ms(), elastic.generation(),
                                             seen["step"] - state.step))
        seen["step"] = state.step

    state.register_reset_callbacks([on_reset])

    @elastic.run
    def train(state):
        w = model.w
        while True:
            if (max_steps > 0 and state.step >= max_steps) or (max_steps == 0 and
                                                               wall_ms() >= deadline):
                return
            try:
                hvd.allreduce_(w, op=hvd.Average)
                state.step += 1
                state.commit()
            except hvd.HostsUpdatedInterrupt:
                raise
            except hvd.HvError as exc:
                say("fail %d gen=%d rank=%d rc=%s step=%d" % (wall_ms(), elastic.generation(),
                                                              hvd.rank(), exc.errname,
                                                              state.step))
                raise
            seen["step"] = max(seen["step"], state.step)
            g = elastic.generation()
            if seen["printed_gen"] != g:
                seen["printed_gen"] = g
                say("step %d gen=%d size=%d step=%d" % (wall_ms(), g, hvd.size(), state.step))
            if step_ms > 0:
                time.sleep(step_ms / 1000.0)

    train(state)
    if state.removed:
        say("left %d gen=%d" % (wall_ms(), elastic.generation()))
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
