"""hv._node: what a worker under hvagent says when its node lacks a piece the job needs.

A job submitted as `hvsubmit -- python3 train.py` runs the node's own interpreter; a node without
torch, or where libhv cannot be loaded, would otherwise fail rank N with an ImportError stack
trace. Under hvagent (HV_NODE_NAME and HV_JOB_ID set) `missing` instead prints one line naming
the node and the missing piece and ends the process with MISSING_EXIT, which hvsubmit reports
as the job's exit status. Outside an agent it returns, and the caller raises ImportError as usual.
Only the standard library: this runs before anything else could be imported.
"""

import os
import sys

#: The exit status of a worker whose node lacks a piece (EX_CONFIG of sysexits.h).
MISSING_EXIT = 78


def missing(piece, detail):
    node = os.environ.get("HV_NODE_NAME")
    if not node or not os.environ.get("HV_JOB_ID"):
        return
    sys.stderr.write("hv: node %s cannot import %s (%s): install it on that node, or run the "
                     "job on nodes that have it\n" % (node, piece, detail))
    sys.stderr.flush()
    raise SystemExit(MISSING_EXIT)


def refused(detail):
    """As missing, for a piece the node has but hv will not use (an HV_LIBRARY others could
    replace): one line naming the node and why, then MISSING_EXIT under hvagent."""
    node = os.environ.get("HV_NODE_NAME")
    if not node or not os.environ.get("HV_JOB_ID"):
        return
    sys.stderr.write("hv: node %s: %s\n" % (node, detail))
    sys.stderr.flush()
    raise SystemExit(MISSING_EXIT)
