"""pbwire: the protobuf wire format by hand, for the test tools that speak hv's proto without
generated code (hostile_client.py, hostile_node.py, fd_flood.py): they must stay independent of
hv's own encoders, so they share this small module instead of the C code."""


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def key(field, wire):
    return varint(field << 3 | wire)


def f_int(field, v):
    """A varint field; 0 is left out, as proto3 does."""
    return key(field, 0) + varint(v) if v else b""


def f_bytes(field, b):
    """A length-delimited field (str is sent as UTF-8)."""
    b = b.encode() if isinstance(b, str) else b
    return key(field, 2) + varint(len(b)) + b


def read_varint(data, i):
    v, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def fields(data):
    """Top-level fields of a message: {number: [value, ...]} (varints as int, others as bytes)."""
    out, i = {}, 0
    while i < len(data):
        k, i = read_varint(data, i)
        num, wire = k >> 3, k & 7
        if wire == 0:
            v, i = read_varint(data, i)
        elif wire == 2:
            n, i = read_varint(data, i)
            v, i = data[i:i + n], i + n
        elif wire == 1:
            v, i = data[i:i + 8], i + 8
        elif wire == 5:
            v, i = data[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        out.setdefault(num, []).append(v)
    return out
