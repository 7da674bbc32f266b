#!/usr/bin/python3
"""check_indices.py DIR N EPOCHS: checks the index logs of pytorch_mnist_elastic.py --index-log
DIR (one file per worker process): in every epoch, the committed training used each of the N
samples exactly once.

A log line "T commit=C epoch=E i j k ..." says that the samples i j k of epoch E are in the
state of commit C (written just before that commit, at time T); "T restart commits=C" says that
the process (re-)entered the training function at time T with the state of commit C: whatever
any process logged before T for a commit above C was rolled back. Exit 0 and a summary line
when every epoch is exact; exit 1 naming the missing and repeated samples otherwise.
"""

import collections
import os
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: check_indices.py DIR N EPOCHS\n")
        return 2
    d, n, epochs = argv[0], int(argv[1]), int(argv[2])
    entries, restarts = [], []
    files = sorted(os.listdir(d))
    for name in files:
        with open(os.path.join(d, name)) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1] == "restart":
                    restarts.append((float(parts[0]), int(parts[2].split("=")[1])))
                elif len(parts) >= 3 and parts[1].startswith("commit="):
                    entries.append((float(parts[0]), int(parts[1].split("=")[1]),
                                    int(parts[2].split("=")[1]), [int(x) for x in parts[3:]]))
    used = collections.defaultdict(collections.Counter)
    void = 0
    for t, c, e, idx in entries:
        if any(tr > t and cr < c for tr, cr in restarts):
            void += len(idx)
            continue
        used[e].update(idx)
    bad = []
    for e in range(epochs):
        missing = [i for i in range(n) if used[e][i] == 0]
        twice = sorted(i for i, k in used[e].items() if k > 1)
        extra = sorted(i for i in used[e] if not 0 <= i < n)
        if missing or twice or extra:
            bad.append("epoch %d: %d missing %s, %d more than once %s%s" %
                       (e, len(missing), missing[:10], len(twice), twice[:10],
                        ", out of range %s" % extra[:10] if extra else ""))
    if bad:
        print("FAIL: " + "; ".join(bad))
        return 1
    print("exact: %d epochs of %d samples each once, from %d files (%d restarts, %d samples "
          "rolled back)" % (epochs, n, len(files), len(restarts), void))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
