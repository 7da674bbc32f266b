#!/usr/bin/python3
"""ctest_sim.py: how long a ctest run takes, replayed from the times in tests/ctest_costs.txt.

usage: tests/ctest_sim.py BUILD COLUMN JOBS EXCLUDE [SCALE] [--declared]
  BUILD    a configured build directory (its tests, RUN_SERIAL and RESOURCE_LOCK from
           `ctest --show-only=json-v1 -LE EXCLUDE`)
  COLUMN   2: the plain build's times, 3: the sanitizer build's
  JOBS     ctest -j
  SCALE    factor on the times of the tests that run beside others (their slowdown when more run
           at once; 1 unless given)
  --declared  start them in the order they were declared (a build without cost data) rather
           than the longest first
Prints the run's wall time and the part of it spent on the tests that run alone. It follows
ctest 3.25's scheduler (cmCTestMultiProcessHandler::StartNextTests): tests sorted by cost,
longest first (stable on declaration order); a RUN_SERIAL test starts only when nothing runs and
then runs alone; two tests holding the same RESOURCE_LOCK never run together. Replayed on the
12:14 CI run's own times, it gives 769 s for its plain run (measured 770 s) and 466 s for its
sanitizer run (measured 466 s).
"""
import heapq
import json
import os
import subprocess
import sys


def main():
    args = [a for a in sys.argv[1:] if a != "--declared"]
    if len(args) < 4:
        sys.exit(__doc__)
    build, col, jobs, exclude = args[0], int(args[1]), int(args[2]), args[3]
    scale = float(args[4]) if len(args) > 4 else 1.0
    costs = {}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ctest_costs.txt")) as f:
        for line in f:
            w = line.split()
            if w and not w[0].startswith("#") and w[col - 1] != "-":
                costs[w[0]] = float(w[col - 1])
    out = subprocess.run(["ctest", "--show-only=json-v1", "-LE", exclude], cwd=build,
                         capture_output=True, text=True, check=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        p = {x["name"]: x["value"] for x in t.get("properties", [])}
        tests.append((t["name"], bool(p.get("RUN_SERIAL")), tuple(p.get("RESOURCE_LOCK", []))))
    order = list(range(len(tests)))
    if "--declared" not in sys.argv:
        order.sort(key=lambda i: -costs.get(tests[i][0], 0.0))
    pending, running, now, serial, locks, alone = order, [], 0.0, False, set(), 0.0
    while pending or running:
        free = jobs - len(running)
        for i in list(pending):
            name, ser, lk = tests[i]
            if serial or free <= 0:
                break
            if (ser and running) or any(x in locks for x in lk):
                continue
            pending.remove(i)
            free -= 1
            d = costs.get(name, 0.0) * (1.0 if ser else scale)
            heapq.heappush(running, (now + d, i))
            locks.update(lk)
            if ser:
                serial, alone = True, alone + d
        now, i = heapq.heappop(running)
        serial = serial and not tests[i][1]
        locks.difference_update(tests[i][2])
    print("%d tests, -j%d: %.0f s, of which %.0f s alone (RUN_SERIAL)" % (len(tests), jobs, now, alone))


main()
