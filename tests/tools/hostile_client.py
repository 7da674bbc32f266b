#!/usr/bin/python3
"""hostile_client: an independent gRPC client (Debian's python3-grpcio; it shares no code with hv)
that sends wrong credentials and hostile payloads to every method of the head and checks the
status codes the Trust issue promises. Messages are written as raw protobuf bytes by hand.

usage: hostile_client.py HOST:PORT PROTO CLIENT_TOKEN_FILE [JOIN_TOKEN]
With JOIN_TOKEN, Join is part of the size bounds and UTF-8 sections too. From the environment
(each optional, for the sections on job credentials, issue 24):
  HV_HOSTILE_LIVE_SECRET  the worker secret of a running job (on a node whose agent runs workers
                          as another user than some other node's)
  HV_HOSTILE_OTHER_LABEL  K=V naming that other node (its user is not the job's)
  HV_HOSTILE_DEAD_SECRET  the worker secret of a job that has ended
Prints one line per check; exits 1 if any check failed, 0 otherwise.
"""
import concurrent.futures
import os
import re
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pbwire import varint  # noqa: E402

OK, INVALID, NOT_FOUND, PERM, EXHAUSTED, UNAUTH = 0, 3, 5, 7, 8, 16
BAD = {2: "UNKNOWN", 13: "INTERNAL"}

target, proto, token_file = sys.argv[1:4]
join_token = sys.argv[4] if len(sys.argv) > 4 else None
token = open(token_file).read().strip()

# (service, method, client-streaming, server-streaming) from the wire contract itself
methods = []
service = None
for line in open(proto):
    m = re.match(r"\s*service\s+(\w+)", line)
    if m:
        service = m.group(1)
    m = re.match(r"\s*rpc\s+(\w+)\((stream\s+)?\w+\)\s+returns\s+\((stream\s+)?\w+\)", line)
    if m and service:
        methods.append((service, m.group(1), bool(m.group(2)), bool(m.group(3))))
if len(methods) < 18:
    sys.exit("found only %d methods in %s" % (len(methods), proto))

chan = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)])
failures = 0
# The Keeper service is served by an agent (its copy address), not by the head: its methods go
# there when the caller names it (HV_HOSTILE_KEEPER), and are left out, said so, otherwise.
keeper_target = os.environ.get("HV_HOSTILE_KEEPER", "")
keeper_chan = grpc.insecure_channel(
    keeper_target, options=[("grpc.max_send_message_length", 64 << 20)]) if keeper_target else None


def target_of(svc):
    return keeper_target if svc == "Keeper" else target


def call(svc, meth, cstream, sstream, payload, auth, ch=None):
    """Returns (code, details) of one call with payload bytes and an authorization value."""
    ch = ch or (keeper_chan if svc == "Keeper" else chan)
    path = "/hvpb.v1.%s/%s" % (svc, meth)
    md = [("authorization", auth)] if auth is not None else None
    ident = lambda b: b  # noqa: E731 (raw bytes both ways)
    try:
        if cstream and sstream:
            it = ch.stream_stream(path, ident, ident)(iter([payload]), metadata=md, timeout=5)
            for _ in it:
                break
            return OK, ""
        if sstream:
            it = ch.unary_stream(path, ident, ident)(payload, metadata=md, timeout=5)
            for _ in it:
                break
            return OK, ""
        ch.unary_unary(path, ident, ident)(payload, metadata=md, timeout=5)
        return OK, ""
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return 4, e.details() or ""
        return e.code().value[0], e.details() or ""


def check(name, got, want, details):
    global failures
    good = got in want and got not in BAD
    if not good:
        failures += 1
    print("%s %s: got %d, want %s%s" % ("ok  " if good else "FAIL", name, got,
                                         "/".join(str(w) for w in sorted(want)),
                                         "" if good else " (%s)" % details))


GARBAGE = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x02"  # a varint that never ends well
HUGE = b"\x0a" + varint(6 << 20) + b"A" * (6 << 20)        # a 6 MiB string field 1
FORGED = "Bearer hvw_" + "1" * 40                          # a worker secret nobody signed

for svc, meth, cs, ss in methods:
    n = "%s/%s" % (svc, meth)
    if svc == "Keeper" and keeper_chan is None:
        print("skip %s: no keeper address given (HV_HOSTILE_KEEPER)" % n)
        continue
    # 1. no credential, a valid (empty) message: UNAUTHENTICATED
    got, d = call(svc, meth, cs, ss, b"", None)
    check(n + " no credential", got, {UNAUTH}, d)
    if got == UNAUTH and ("job" in d.lower() and "exist" in d.lower()):
        check(n + " says nothing of jobs", 1, {0}, d)
    # 2. credentials that are not ours: UNAUTHENTICATED
    for label, auth in (("forged worker secret", FORGED), ("unknown client token",
                        "Bearer hvc_" + "0" * 32), ("Basic auth", "Basic dXNlcjpwYXNz"),
                        ("empty bearer", "Bearer ")):
        got, d = call(svc, meth, cs, ss, b"", auth)
        check("%s %s" % (n, label), got, {UNAUTH, PERM}, d)
    # a 64 KiB credential: gRPC's own metadata limit refuses it (RESOURCE_EXHAUSTED) before hv
    # sees it, and closes that connection: on a channel of its own
    big = grpc.insecure_channel(target_of(svc))
    got, d = call(svc, meth, cs, ss, b"", "Bearer hvc_" + "x" * 65536, big)
    big.close()
    check(n + " 64 KiB token", got, {UNAUTH, PERM, EXHAUSTED}, d)
    # 3. a client token outside its scope: PERMISSION_DENIED (Join takes a join token in its
    #    body: a client token there is no credential at all)
    if svc in ("Cluster", "Rendezvous"):
        got, d = call(svc, meth, cs, ss, b"", "Bearer " + token)
        check(n + " client token out of scope", got, {PERM, UNAUTH} if meth == "Join" else {PERM}, d)
        continue
    # 4. the right credential and hostile bytes: INVALID_ARGUMENT (or a size refusal)
    got, d = call(svc, meth, cs, ss, GARBAGE, "Bearer " + token)
    check(n + " garbage", got, {INVALID}, d)
    # 6 MiB in field 1: refused for its size or content, or (where field 1 is unknown to the
    # message) ignored; never UNKNOWN or INTERNAL, and never echoed back whole
    got, d = call(svc, meth, cs, ss, HUGE, "Bearer " + token)
    check(n + " 6 MiB message", got, {OK, INVALID, EXHAUSTED, NOT_FOUND, 9}, d[:200])
    if len(d) > 4096:
        check(n + " 6 MiB message: the answer is short", len(d), {0}, "%d bytes" % len(d))

# 5. a burst of unauthenticated calls at once (bounded: 256)
with concurrent.futures.ThreadPoolExecutor(16) as ex:
    codes = list(ex.map(lambda _: call("Jobs", "ListJobs", False, False, b"", None)[0], range(256)))
check("burst of 256 calls without credential", max(codes), {UNAUTH}, sorted(set(codes)))

# 6. the head still serves: a real request with the client token
got, d = call("Jobs", "ListNodes", False, False, b"", "Bearer " + token)
check("ListNodes with the client token afterwards", got, {OK}, d)
got, d = call("Jobs", "GetJob", False, False, b"\x08" + varint(999999), "Bearer " + token)
check("GetJob of a job that does not exist", got, {NOT_FOUND}, d)

# 7. size bounds: every string and list the head stores has a written bound (proto/hv.proto,
#    docs/security.md); a request over one is INVALID_ARGUMENT with a message that names the
#    field, the size and the bound, and the listings keep working for everyone afterwards.


def fld(num, data):
    """A length-delimited field."""
    if isinstance(data, str):
        data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data


def vfld(num, v):
    """A varint field."""
    return varint(num << 3) + varint(v)


def kv(k, v):
    return fld(1, k) + fld(2, v)


DIGEST = "0" * 64
BINARY = fld(1, "train") + fld(2, DIGEST)


def submit(spec_rest):
    return fld(1, fld(2, BINARY) + spec_rest)


def bounded(name, svc, meth, payload, field, limit, client=True):
    """payload to svc/meth, with the client token (client) or none (Join carries its own)."""
    start = time.monotonic()
    got, d = call(svc, meth, False, False, payload, "Bearer " + token if client else None)
    took = time.monotonic() - start
    check("size bounds: " + name, got, {INVALID}, d[:200])
    if got == INVALID:
        good = d.startswith(field) and ("at most %d" % limit) in d and len(d) < 4096
        check("size bounds: %s: the message names %s and %d" % (name, field, limit),
              0 if good else 1, {0}, d[:200])
    check("size bounds: %s: answered within 3 s" % name, 0 if took < 3 else 1, {0},
          "%.1f s" % took)


bounded("job name of 5 MiB", "Jobs", "Submit", submit(fld(1, "n" * (5 << 20))), "spec.name:", 256)
bounded("env value of 3 MiB", "Jobs", "Submit", submit(fld(4, kv("BIG", "v" * (3 << 20)))),
        "spec.env[0].value:", 65536)
bounded("50,000 env entries", "Jobs", "Submit",
        submit(b"".join(fld(4, kv("K%d" % i, "v")) for i in range(50000))),
        "spec.env: 50000 entries", 4096)
bounded("4097 arguments", "Jobs", "Submit", submit(b"".join(fld(3, "a") for _ in range(4097))),
        "spec.args: 4097 arguments", 4096)
bounded("upload chunk of 8 MiB", "Jobs", "Upload",
        fld(1, DIGEST) + vfld(2, 16 << 20) + vfld(3, 0) + fld(4, b"\0" * (8 << 20)),
        "data: a chunk of 8388608 bytes", 1 << 20)
bounded("drain reason of 64 KiB", "Jobs", "DrainNode", fld(1, "node-a") + fld(3, "r" * 65536),
        "reason:", 1024)
if join_token is not None:
    def join(labels):
        node = fld(1, "hostile-node") + vfld(3, 1) + b"".join(fld(5, kv(k, v)) for k, v in labels)
        return fld(1, join_token) + fld(2, node) + vfld(3, 7)
    bounded("64 labels of 60 KB", "Cluster", "Join",
            join([("k%d" % i, "v" * 60000) for i in range(64)]), "node.labels[0].value:", 256,
            client=False)
    bounded("65 labels", "Cluster", "Join", join([("k%d" % i, "v") for i in range(65)]),
            "node.labels: 65 entries", 64, client=False)
for meth in ("ListJobs", "ListNodes"):
    got, d = call("Jobs", meth, False, False, b"", "Bearer " + token)
    check("size bounds: %s works afterwards" % meth, got, {OK}, d)


# 8. a job's worker and actors (issue 24 §1): an actor it creates runs only as its job's user.
def actor_spec(name, labels=(), cls="sh"):
    """An ActorSpec running /bin/sh -c id (field numbers of hv.proto's ActorSpec)."""
    return (fld(1, name) + fld(3, cls) + fld(6, "/bin/sh") + fld(7, "-c") + fld(7, "id") +
            b"".join(fld(12, kv(k, v)) for k, v in labels) + vfld(14, 1))


def worker_call(name, meth, payload, secret, want, words=None):
    got, d = call("Actors" if "/" not in meth else meth.split("/")[0],
                  meth.split("/")[-1], False, False, payload, "Bearer " + secret)
    check(name, got, want, d[:300])
    if words is not None and got in want:
        check(name + ": says '%s'" % words, 0 if words in d else 1, {0}, d[:300])
    return got, d


live = os.environ.get("HV_HOSTILE_LIVE_SECRET")
other = os.environ.get("HV_HOSTILE_OTHER_LABEL")
if live:
    worker_call("run-as: a worker's actor as root", "Create",
                fld(1, actor_spec("as-root", [("hv.run_as", "root")])), live, {PERM},
                "runs as that user only")
    if other:
        k, v = other.split("=", 1)
        worker_call("run-as: a worker's actor on another user's node", "Create",
                    fld(1, actor_spec("elsewhere", [(k, v)])), live, {PERM},
                    "none of the")

# 9. a worker secret dies with its job (issue 24 §2): every service refuses it.
dead = os.environ.get("HV_HOSTILE_DEAD_SECRET")
if dead:
    ref = fld(1, fld(2, "nosuch"))
    for label, meth, payload in (
            ("Actors.Get with_secret", "Get", ref + vfld(2, 1)),
            ("Actors.List", "List", b""),
            ("Actors.Create", "Create", fld(1, actor_spec("ghost"))),
            ("Actors.Kill", "Kill", ref),
            ("Actors.Logs", "Logs", ref),
            ("Rendezvous.KvGet", "Rendezvous/KvGet", vfld(1, int(dead.split("_")[1])) + fld(2, "k")),
            ("Rendezvous.JoinRound", "Rendezvous/JoinRound",
             vfld(1, int(dead.split("_")[1])) + vfld(2, int(dead.split("_")[2])))):
        worker_call("dead secret: " + label, meth, payload, dead, {UNAUTH}, "no longer valid")

# 10. text that is not UTF-8 (issue 24 §3): refused naming the field, nothing stored, and every
#     listing still decodes for a strict client (Python's own protobuf).
FF = b"\xff"
utf8_cases = [
    ("job name", "Jobs", "Submit", fld(1, fld(1, b"job" + FF) + fld(21, "/bin/true") + vfld(6, 1)),
     "spec.name"),
    ("env name", "Jobs", "Submit",
     fld(1, fld(1, "j") + fld(21, "/bin/true") + vfld(6, 1) + fld(4, kv(b"K" + FF, "v"))),
     "spec.env[0].key"),
    ("actor class", "Actors", "Create", fld(1, actor_spec("u8", cls=b"c" + FF)), "spec.class_name"),
    ("drain reason", "Jobs", "DrainNode", fld(1, "node-a") + fld(3, b"r" + FF), "reason"),
    ("audit filter", "Jobs", "ListAudit", fld(2, b"w" + FF), "who"),
]
for label, svc, meth, payload, field in utf8_cases:
    got, d = call(svc, meth, False, False, payload, "Bearer " + token)
    check("utf-8: " + label, got, {INVALID}, d[:200])
    if got == INVALID:
        check("utf-8: %s: names %s" % (label, field),
              0 if d.startswith(field + ": not UTF-8 text") else 1, {0}, d[:200])
if join_token is not None:
    node = fld(1, b"node" + FF) + vfld(3, 1)
    got, d = call("Cluster", "Join", False, False, fld(1, join_token) + fld(2, node) + vfld(3, 9),
                  None)
    check("utf-8: node name (Join)", got, {INVALID}, d[:200])
    check("utf-8: node name: names node.name", 0 if d.startswith("node.name: not UTF-8") else 1,
          {0}, d[:200])
try:
    import pbstrict  # noqa: E402 (python3-protobuf and protoc-c: the strict client)
    C = pbstrict.load(os.path.dirname(os.path.abspath(proto)))
except Exception as e:  # noqa: BLE001 (no strict runtime here: the raw checks above stand)
    C = None
    print("note: no strict protobuf runtime (%s): listings not decoded" % e)
if C is not None:
    strict = (("ListJobs", "Jobs/ListJobs", C["hvpb.v1.ListJobsRequest"](limit=1000),
               "ListJobsReply"),
              ("ListEvents", "Jobs/ListEvents", C["hvpb.v1.ListEventsRequest"](limit=10000),
               "ListEventsReply"),
              ("ListAudit", "Jobs/ListAudit", C["hvpb.v1.ListAuditRequest"](limit=1000),
               "ListAuditReply"),
              ("ListNodes", "Jobs/ListNodes", C["hvpb.v1.ListNodesRequest"](), "ListNodesReply"),
              ("Actors.List", "Actors/List", C["hvpb.v1.ListActorsRequest"](), "ListActorsReply"))
    for label, meth, req, reply in strict:
        try:
            r = pbstrict.call(chan, meth, req, C["hvpb.v1." + reply], token)
            got, d = OK, ""
        except grpc.RpcError as e:
            r, got, d = None, e.code().value[0], e.details() or ""
        check("utf-8: a strict client decodes " + label, got, {OK}, d[:200])
        if label == "ListJobs" and r is not None:
            for j in r.jobs:
                try:
                    pbstrict.call(chan, "Jobs/GetJob", C["hvpb.v1.JobRef"](job_id=j.job_id),
                                  C["hvpb.v1.JobView"], token)
                    got, d = OK, ""
                except grpc.RpcError as e:
                    got, d = e.code().value[0], e.details() or ""
                check("utf-8: a strict client decodes GetJob %d" % j.job_id, got, {OK}, d[:200])

print("%d check(s) failed" % failures)
sys.exit(1 if failures else 0)
