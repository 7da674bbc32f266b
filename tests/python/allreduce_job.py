"""allreduce_job.py: a tiny Python job for tests/integration/python_job.sh, submitted as
`hvsubmit -np 2 -- /usr/bin/python3 allreduce_job.py [--helper] [--subpkg] [--exit N]`.

Every rank contributes rank + 1 to a Sum allreduce and prints "rank R size S sum X"; with
--helper it also imports job_helper (shipped with --workdir) and prints its greeting; with
--subpkg it imports pkg.sub.mod (a subpackage shipped with --workdir) and prints its where(); with
--exit N every rank exits N after shutdown; with --where it prints where hv and libhv were loaded
from ("rank R hv DIR lib PATH"). hv.torch is imported first so that a node without torch fails
with hv's one-line message (hv._node).
"""

import sys

import hv.torch as hvd
import torch

hvd.init()
r, n = hvd.rank(), hvd.size()
total = hvd.allreduce(torch.full((4,), float(r + 1)), op=hvd.Sum)
print("rank %d size %d sum %g" % (r, n, total[0].item()), flush=True)
if "--helper" in sys.argv:
    import job_helper
    print("rank %d helper %s" % (r, job_helper.greeting()), flush=True)
if "--where" in sys.argv:
    import os
    import hv
    print("rank %d hv %s lib %s" % (r, os.path.dirname(hv.__file__), hv.library_path), flush=True)
if "--subpkg" in sys.argv:
    from pkg.sub import mod  # a subpackage shipped with --workdir
    print("rank %d subpkg %s" % (r, mod.where()), flush=True)
hvd.shutdown()
sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]) if "--exit" in sys.argv else 0)
