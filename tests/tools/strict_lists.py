#!/usr/bin/python3
"""strict_lists: what a user of Python's protobuf (strict about UTF-8) gets from the head's
listings: ListJobs, GetJob of every job listed, ListEvents, ListAudit, ListNodes, Actors.List.
Each must answer and decode. Prints one line per call; exits 1 if any failed.

usage: strict_lists.py HOST:PORT PROTO_DIR CLIENT_TOKEN_FILE
"""
import os
import sys

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pbstrict  # noqa: E402

target, proto_dir, token_file = sys.argv[1:4]
token = open(token_file).read().strip()
C = pbstrict.load(proto_dir)
chan = grpc.insecure_channel(target)
failed = 0


def check(name, method, req, reply):
    global failed
    try:
        r = pbstrict.call(chan, method, req, C["hvpb.v1." + reply], token)
        print("ok   %s" % name)
        return r
    except grpc.RpcError as e:
        failed += 1
        print("FAIL %s: %s %s" % (name, e.code().name, (e.details() or "")[:200]))
        return None


jobs = check("ListJobs", "Jobs/ListJobs", C["hvpb.v1.ListJobsRequest"](limit=1000), "ListJobsReply")
for j in (jobs.jobs if jobs is not None else []):
    check("GetJob %d" % j.job_id, "Jobs/GetJob", C["hvpb.v1.JobRef"](job_id=j.job_id), "JobView")
check("ListEvents", "Jobs/ListEvents", C["hvpb.v1.ListEventsRequest"](limit=10000),
      "ListEventsReply")
check("ListAudit", "Jobs/ListAudit", C["hvpb.v1.ListAuditRequest"](limit=1000), "ListAuditReply")
check("ListNodes", "Jobs/ListNodes", C["hvpb.v1.ListNodesRequest"](), "ListNodesReply")
check("Actors.List", "Actors/List", C["hvpb.v1.ListActorsRequest"](), "ListActorsReply")
print("%d call(s) failed" % failed)
sys.exit(1 if failed else 0)
