"""pbstrict: hv's messages as Python's own protobuf runtime (Debian's python3-protobuf) decodes
them, strictly: a proto3 string that is not UTF-8 fails to decode, as it does for every standard
client (Python, Go, Java). The classes are built at run time from proto/hv.proto, compiled to a
descriptor set by protoc-c (hv's build tool), so no generated code is kept in the tree.

    classes = pbstrict.load("/path/to/proto")     # {"hvpb.v1.JobView": class, ...}
    reply = pbstrict.call(chan, "Jobs/ListJobs", classes["hvpb.v1.ListJobsRequest"](),
                          classes["hvpb.v1.ListJobsReply"], token)
"""
import os
import subprocess
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def load(proto_dir):
    """Every message of hv.proto by its full name."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "hv.pb")
        subprocess.run(["protoc-c", "--descriptor_set_out=" + out, "-I" + proto_dir,
                        os.path.join(proto_dir, "hv.proto")], check=True)
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    classes = {}
    for fd in fds.file:
        for m in fd.message_type:
            name = "%s.%s" % (fd.package, m.name)
            desc = pool.FindMessageTypeByName(name)
            if hasattr(message_factory, "GetMessageClass"):
                classes[name] = message_factory.GetMessageClass(desc)
            else:
                classes[name] = message_factory.MessageFactory(pool).GetPrototype(desc)
    return classes


def call(chan, method, req, reply_cls, token, timeout=10):
    """One unary call of "Service/Method" decoded strictly; raises grpc.RpcError (INTERNAL when
    the reply does not decode: a string that is not UTF-8)."""
    stub = chan.unary_unary("/hvpb.v1." + method, request_serializer=lambda m: m.SerializeToString(),
                            response_deserializer=reply_cls.FromString)
    return stub(req, metadata=[("authorization", "Bearer " + token)], timeout=timeout)
