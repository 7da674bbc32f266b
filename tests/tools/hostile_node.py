#!/usr/bin/python3
"""hostile_node: a node that joins with the cluster's join token (as any new agent may), then
uses its own node credential on its own Session to report on workers placed on another node:
`started`, a `log` line and `exited` with status 0 for each worker id given; then it fetches an
artifact that only the other node's workers use. An independent gRPC
client (Debian's python3-grpcio; it shares no code with hv); messages are raw protobuf bytes.

usage: hostile_node.py HOST:PORT JOIN_TOKEN NODE_NAME FORGED_LINE DIGEST WORKER_ID...
Prints "node_id=N" after the join, "acked=S": the highest seq the head acknowledged on the Session
(0: none of the reports was taken as applied), and "fetch=CODE": the gRPC status of the fetch of
DIGEST (0 OK, 7 PERMISSION_DENIED). Exits 1 if the join or the Session
could not be opened, 0 otherwise (whether the head applied the reports is for the caller to judge).
"""
import os
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pbwire import f_bytes, f_int, fields  # noqa: E402

target, join_token, name, forged, digest = sys.argv[1:6]
workers = [int(w) for w in sys.argv[6:]]
INCARNATION = 0x5EC0DE


ident = lambda b: b  # noqa: E731 (raw bytes both ways)
chan = grpc.insecure_channel(target)

# Join as a new node with the join token: NodeInfo{name, addrs, slots 1}
node = f_bytes(1, name) + f_bytes(2, "127.0.0.1") + f_int(3, 1)
req = f_bytes(1, join_token) + f_bytes(2, node) + f_int(3, INCARNATION)
try:
    rep = fields(chan.unary_unary("/hvpb.v1.Cluster/Join", ident, ident)(req, timeout=5))
except grpc.RpcError as e:
    sys.exit("join refused: %s %s" % (e.code(), e.details()))
node_id = rep[1][0]
cred = rep[5][0].decode()
print("node_id=%d" % node_id, flush=True)


def session():
    # AgentMsg: seq = 1, hello = 10, started = 12, exited = 13, log = 14
    yield f_bytes(10, f_int(1, node_id) + f_int(3, INCARNATION))
    seq = 0
    for w in workers:
        seq += 1
        yield f_int(1, seq) + f_bytes(12, f_int(1, w) + f_int(2, 4242))
        yield f_bytes(14, f_int(1, w) + f_int(2, 1) + f_bytes(3, forged))
        seq += 1
        yield f_int(1, seq) + f_bytes(13, f_int(1, w))  # exit_code 0, no signal
    time.sleep(1.5)  # the head's answers (acks) arrive meanwhile


acked = 0
md = [("authorization", "Bearer " + cred)]
try:
    for m in chan.stream_stream("/hvpb.v1.Cluster/Session", ident, ident)(
            session(), metadata=md, timeout=4):
        acked = max([acked] + fields(m).get(1, []))
except grpc.RpcError as e:
    if e.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
        print("session ended: %s %s" % (e.code(), e.details()), flush=True)
print("acked=%d" % acked, flush=True)

try:
    for _ in chan.unary_stream("/hvpb.v1.Cluster/Fetch", ident, ident)(
            f_bytes(1, digest), metadata=md, timeout=4):
        pass
    code = 0
except grpc.RpcError as e:
    code = e.code().value[0]
print("fetch=%d" % code, flush=True)
