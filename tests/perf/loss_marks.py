"""What the node-loss benchmarks (bench_node_loss.sh, bench_lone_loss.sh, bench_silent_loss.sh)
read back from a run's directory D: the first step of each generation (D/sub.out, bench_elastic's
"BENCH step T gen=G" lines), the head's events (D/events.json) and the losses the script marked
(D/marks: "KIND TIME GEN NODE" a line). Imported from their inline Python (PYTHONPATH=tests/perf).
"""
import json
import re
import statistics


def first_steps(d):
    """{generation: the time (ms) of its first step}"""
    steps = {}
    for line in open(d + "/sub.out"):
        m = re.search(r"BENCH step (\d+) gen=(\d+)", line)
        if m:
            t, g = int(m.group(1)), int(m.group(2))
            steps[g] = min(steps.get(g, t), t)
    return steps


def events(d):
    return json.load(open(d + "/events.json"))["events"]


def round_times(evs, kind):
    """{generation: time (ms)} of the round.open or round.close events"""
    return {e["data"]["generation"]: e["time_ms"] for e in evs if e["kind"] == kind}


def losses(d, steps):
    """(time of the loss, node, the first generation after it that stepped) for each mark that
    one followed"""
    for _, t, g, node in (line.split() for line in open(d + "/marks")):
        later = sorted(x for x in steps if x > int(g))
        if later:
            yield int(t), node, later[0]


def mm(v):
    """median and worst, ms, as the tables print them"""
    return ("%6.0f %6.0f" % (statistics.median(v), max(v))) if v else "     -      -"
